package com.fenecdb;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.Test;

/** The SDK as a Java caller uses it: the blocking twins, from plain Java. */
class JavaBlockingTest {
    @Test
    void queueLoopFromJava() {
        try (FenecServer server = new FenecServer(new String[0], true, ":memory:", "127.0.0.1:0")) {
            Client db = Fenec.connect(server.getUrl(), null, Duration.ofSeconds(5));
            db.queryBlocking("create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)");
            Query jobs = db.from("jobs");
            long put = jobs.insertBlocking(List.of(
                Map.of("payload", Map.of("to", "ada@example.com"), "run_at", Values.expr("now()"), "attempts", 0),
                Map.of("payload", Map.of("to", "bo@example.com"), "run_at", Values.expr("now()"), "attempts", 0)));
            assertEquals(2, put);

            List<Row> claimed = jobs.where(Values.raw("run_at <= now()")).order("run_at").limit(10)
                .withWait(Duration.ofSeconds(1))
                .updateReturningBlocking(Map.of("owner", "java:1", "run_at", Values.expr("now() + ?", 30000), "attempts", Values.inc()));
            assertEquals(2, claimed.size());
            for (Row job : claimed) {
                assertEquals(1L, job.getLong("attempts"));
                assertTrue(job.getInstant("run_at").isAfter(Instant.parse("2026-05-03T09:20:00Z")));
                assertEquals(1, jobs.where("id", job.get("id")).where("owner", "java:1").deleteBlocking(1L));
            }
            assertEquals(0L, jobs.countBlocking());

            FenecException e = assertThrows(FenecException.class, () -> jobs.where("id", 1).deleteBlocking(1L));
            assertEquals(412, e.getStatus());
            assertEquals(ErrorCode.UNMET, e.getCode());
            assertThrows(IllegalArgumentException.class, () -> jobs.where("payload..to", 1));
            assertThrows(IllegalArgumentException.class, () -> Fenec.connect("127.0.0.1:8080"));
        }
    }

    @Test
    void futuresFromJava() throws Exception {
        try (FenecServer server = new FenecServer(new String[0], true, ":memory:", "127.0.0.1:0")) {
            Client db = Fenec.connect(server.getUrl());
            db.queryAsync("create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)").get();
            Query jobs = db.from("jobs");
            assertEquals(3L, jobs.insertAsync(List.of(Map.of("attempts", 0), Map.of("attempts", 1), Map.of("attempts", 2))).get());
            assertEquals(3L, jobs.countAsync().get());
            assertEquals(2, jobs.where("attempts", ">", 0).rowsAsync().get().size());
            assertEquals(1L, jobs.where("attempts", 2).updateAsync(Map.of("owner", "java:1")).get());
            assertEquals("java:1", jobs.where("attempts", 2).firstAsync().get().getString("owner"));
            assertEquals(1L, jobs.where("attempts", 0).deleteAsync().get());
            assertEquals(2, db.batchAsync(List.of(jobs.renderCount(), jobs.renderRows())).get().size());
            java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                () -> jobs.where("id", 999).deleteAsync(1L).get());
            assertEquals(ErrorCode.UNMET, ((FenecException) e.getCause()).getCode());
        }
    }

    @Test
    void workerFromJava() throws Exception {
        try (FenecServer server = new FenecServer(new String[0], false, ":memory:", "127.0.0.1:0")) {
            Client db = Fenec.connect(server.getUrl());
            db.queryBlocking("create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)");
            Set<Object> seen = ConcurrentHashMap.newKeySet();
            WorkerOptions options = new WorkerOptions().withConcurrency(4).withLease(Duration.ofSeconds(5)).withMaxAttempts(2);
            Worker worker = Worker.blocking(db.from("jobs"), options, job -> seen.add(job.get("id")));
            Thread thread = new Thread(worker::runBlocking);
            thread.start();
            for (int i = 0; i < 20; i++) {
                db.from("jobs").insertBlocking(Map.of("payload", Map.of("n", i), "run_at", Values.expr("now()"), "attempts", 0));
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
            while (db.from("jobs").countBlocking() > 0 && System.nanoTime() < deadline) Thread.sleep(20);
            worker.close();
            thread.join(20_000);
            assertEquals(20, seen.size());
            assertEquals(0L, db.from("jobs").countBlocking());
        }
    }
}
