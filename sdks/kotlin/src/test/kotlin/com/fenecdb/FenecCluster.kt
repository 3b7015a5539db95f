package com.fenecdb

import java.net.ServerSocket
import java.net.URI
import java.net.http.HttpClient
import java.net.http.HttpRequest
import java.net.http.HttpResponse
import java.nio.file.Files
import java.time.Duration

/**
 * Three real `fenec serve` nodes on loopback ports, started as
 * server/cmd/fenec/cluster_test.go starts them (docs/cluster.md): `--node-id
 * nK --raft … --http … --file … --bootstrap n1=…,n2=…,n3=…`, all with
 * [token]. Close kills them (their files are the test's to throw away).
 */
class FenecCluster(val token: String, n: Int = 3) : AutoCloseable {
    class Node(val id: String, val url: String, val server: FenecServer)

    private val dir = Files.createTempDirectory("fenec-kotlin-cluster-")
    private val http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build()
    val nodes: List<Node>

    init {
        // A port found free may be taken by another process before a node
        // binds it: then the whole cluster starts again on other ports.
        var started: List<Node>? = null
        for (attempt in 1..3) {
            try {
                started = start(n)
                break
            } catch (e: IllegalStateException) {
                if (attempt == 3 || e.message?.contains("address already in use") != true) throw e
                println("FenecCluster: starting again on other ports: ${e.message}")
            }
        }
        nodes = started!!
        leader(20_000)
    }

    private fun start(n: Int): List<Node> {
        val raft = List(n) { freeAddr() }
        val bootstrap = raft.mapIndexed { i, r -> "n${i + 1}=$r" }.joinToString(",")
        val started = mutableListOf<Node>()
        try {
            for (i in 0 until n) {
                val id = "n${i + 1}"
                val addr = freeAddr()
                dir.resolve("$id.db").toFile().delete()
                dir.resolve("$id.db.raft").toFile().deleteRecursively()
                val s = FenecServer(
                    "--node-id", id, "--raft", raft[i], "--bootstrap", bootstrap, "--token", token,
                    manualClock = false, file = dir.resolve("$id.db").toString(), http = addr,
                )
                started += Node(id, "http://$addr", s)
            }
        } catch (e: Throwable) {
            started.forEach { it.server.kill() }
            throw e
        }
        return started
    }

    /** One request with the token: its status and body; null when no answer came. */
    fun request(node: Node, method: String, path: String, body: String? = null): Pair<Int, String>? {
        val b = HttpRequest.newBuilder(URI.create(node.url + path)).timeout(Duration.ofSeconds(5))
            .header("Authorization", "Bearer $token").header("Content-Type", "application/json")
            .method(method, if (body == null) HttpRequest.BodyPublishers.noBody() else HttpRequest.BodyPublishers.ofString(body))
        return try {
            http.send(b.build(), HttpResponse.BodyHandlers.ofString()).let { it.statusCode() to it.body() }
        } catch (e: java.io.IOException) {
            null
        }
    }

    fun role(node: Node): String? {
        if (!node.server.alive) return null
        val (status, body) = request(node, "GET", "/_cluster") ?: return null
        if (status != 200) return null
        return Regex("\"role\":\"([a-z]+)\"").find(body)?.groupValues?.get(1)
    }

    /** Waits until a running node says it leads and takes a write, and answers it. */
    fun leader(withinMs: Long = 10_000): Node {
        val deadline = System.nanoTime() + withinMs * 1_000_000
        while (System.nanoTime() < deadline) {
            for (nd in nodes) {
                if (role(nd) != "leader") continue
                val w = request(nd, "POST", "/query", """{"query": "create collection if not exists probes (k int)"}""")
                if (w?.first == 200) return nd
            }
            Thread.sleep(50)
        }
        error("no node led and took a write within $withinMs ms: " + nodes.joinToString("\n") { "${it.id}: ${it.server.log.takeLast(2000)}" })
    }

    fun followers(leader: Node): List<Node> = nodes.filter { it !== leader && it.server.alive }

    /** The sum of the node's metric samples whose line starts with [prefix]. */
    fun metric(node: Node, prefix: String): Double {
        val (status, body) = request(node, "GET", "/_metrics") ?: error("${node.id} does not answer")
        check(status == 200) { "GET /_metrics on ${node.id}: $status $body" }
        return body.lines().filter { it.startsWith(prefix) }.sumOf { it.substringAfterLast(' ').toDouble() }
    }

    override fun close() {
        nodes.forEach { it.server.kill() }
        dir.toFile().deleteRecursively()
    }

    private fun freeAddr(): String = ServerSocket(0, 0, java.net.InetAddress.getLoopbackAddress()).use { "127.0.0.1:${it.localPort}" }
}
