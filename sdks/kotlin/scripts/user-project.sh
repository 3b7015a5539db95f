#!/usr/bin/env bash
# A user's project, outside the repository: a Maven project that depends on
# com.fenecdb:fenecdb as installed by `mvn install` (into the local
# repository), whose Main.kt is the README's worker. It is compiled and run
# against a real `fenec serve`, and must drain the jobs it puts.
#
#   scripts/user-project.sh <fenec binary> [mvn]
set -euo pipefail
fenec=$1
mvn=${2:-mvn} # may carry flags (MVN="mvn -Dmaven.repo.local=…"): split on purpose below
version=$(sed -n 's#^  <version>\(.*\)</version>#\1#p' "$(dirname "$0")/../pom.xml" | head -1)
kotlin=$(sed -n 's#.*<kotlin.version>\(.*\)</kotlin.version>.*#\1#p' "$(dirname "$0")/../pom.xml")
dir=$(mktemp -d)
server=
cleanup() { [[ -n $server ]] && kill "$server" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT

mkdir -p "$dir/src/main/kotlin"
cat >"$dir/pom.xml" <<POM
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>mailer</artifactId>
  <version>1</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>com.fenecdb</groupId>
      <artifactId>fenecdb</artifactId>
      <version>$version</version>
    </dependency>
  </dependencies>
  <build>
    <sourceDirectory>src/main/kotlin</sourceDirectory>
    <plugins>
      <plugin>
        <groupId>org.jetbrains.kotlin</groupId>
        <artifactId>kotlin-maven-plugin</artifactId>
        <version>$kotlin</version>
        <configuration><jvmTarget>17</jvmTarget></configuration>
        <executions><execution><id>compile</id><goals><goal>compile</goal></goals></execution></executions>
      </plugin>
    </plugins>
  </build>
</project>
POM
cat >"$dir/src/main/kotlin/Main.kt" <<'KT'
import com.fenecdb.*
import kotlinx.coroutines.*
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration.Companion.seconds

fun main(args: Array<String>) = runBlocking {
    val db = Fenec.connect(args[0], token = System.getenv("FENEC_TOKEN"))
    db.query("create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)")
    val jobs = db.from("jobs")
    jobs.insert((1..20).map { mapOf("payload" to mapOf("to" to "user$it@example.com"), "run_at" to expr("now()"), "attempts" to 0) })
    val sent = AtomicInteger()
    val worker = Worker(jobs, WorkerOptions(concurrency = 4)) { job -> job.json("payload"); sent.incrementAndGet() }
    val running = launch(Dispatchers.Default) { worker.run() }
    withTimeout(30.seconds) { while (jobs.count() > 0) delay(20) }
    running.cancelAndJoin() // a graceful stop
    println("sent ${sent.get()}")
}
KT

out=$(mktemp)
"$fenec" serve --http 127.0.0.1:0 --file :memory: >"$out" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q '^listening on' "$out" && break; sleep 0.1; done
addr=$(sed -n 's/^listening on \([^ ]*\).*/\1/p' "$out")
rm -f "$out"
[[ -n $addr ]] || { echo "fenec did not start" >&2; exit 1; }

cd "$dir"
$mvn -B -q package -DskipTests
$mvn -B -q dependency:build-classpath -Dmdep.outputFile=cp.txt
got=$(java -cp "target/classes:$(cat cp.txt)" MainKt "http://$addr")
[[ $got == "sent 20" ]] || { echo "the user's worker answered: $got" >&2; exit 1; }
echo "user project: the README's worker, built from the installed com.fenecdb:fenecdb:$version, $got"
