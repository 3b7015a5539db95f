package com.fenecdb

import com.sun.net.httpserver.HttpServer
import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import java.io.File
import java.net.InetSocketAddress
import java.util.Collections

/**
 * The User-Agent every request carries, read where it lands (an HTTP
 * server on loopback); VERSION kept equal to pom.xml's; and connect() with
 * no URL reading FENEC_URL and FENEC_TOKEN, against a real `fenec serve`.
 */
class AgentEnvTest {
    @Test
    fun `every request names the SDK and the JVM in its User-Agent`() = runBlocking<Unit> {
        val seen = Collections.synchronizedList(mutableListOf<String?>())
        val srv = HttpServer.create(InetSocketAddress("127.0.0.1", 0), 0)
        srv.createContext("/") { ex ->
            seen.add(ex.requestHeaders.getFirst("User-Agent"))
            ex.requestBody.readAllBytes()
            val body = """{"affected":0}""".toByteArray()
            ex.responseHeaders.add("Content-Type", "application/json")
            ex.sendResponseHeaders(200, body.size.toLong())
            ex.responseBody.use { it.write(body) }
        }
        srv.start()
        try {
            Fenec.connect("http://127.0.0.1:${srv.address.port}").query("del jobs")
        } finally {
            srv.stop(0)
        }
        assertEquals(listOf("fenecdb-kotlin/$VERSION java/${System.getProperty("java.version")}"), seen.toList())
    }

    @Test
    fun `VERSION is pom_xml's`() {
        val pom = File("pom.xml").readText()
        val m = Regex("<artifactId>fenecdb</artifactId>\\s*<version>([^<]+)</version>").find(pom)
        assertEquals(m?.groupValues?.get(1), VERSION)
    }

    @Test
    fun `connect() with no URL reads FENEC_URL and FENEC_TOKEN`() = runBlocking<Unit> {
        FenecServer("--token", "sekret").use { s ->
            val env = mapOf("FENEC_URL" to s.url, "FENEC_TOKEN" to "sekret")
            Fenec.connectFromEnv { env[it] }.query("create collection notes (body text)")
            val e = assertThrows<FenecException> { runBlocking { Fenec.connectFromEnv { if (it == "FENEC_URL") s.url else null }.query("get notes") } }
            assertEquals(401, e.status)
        }
        val e = assertThrows<IllegalArgumentException> { Fenec.connectFromEnv { null } }
        assertTrue(e.message!!.contains("FENEC_URL is not set"), e.message)
    }
}
