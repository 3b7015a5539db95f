package com.fenecdb

import kotlinx.coroutines.runBlocking
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.assertThrows
import org.junit.jupiter.api.io.TempDir
import java.nio.file.Files
import java.nio.file.Path
import java.security.KeyStore
import javax.net.ssl.KeyManagerFactory
import javax.net.ssl.SSLContext
import javax.net.ssl.TrustManagerFactory
import kotlin.time.Duration.Companion.seconds

/** https: the client against `fenec serve --tls-cert`, with a CA the test makes with the openssl CLI. */
class TlsTest {
    @TempDir
    lateinit var dir: Path

    private fun openssl(vararg args: String) {
        val p = ProcessBuilder(listOf("openssl") + args).redirectErrorStream(true).start()
        val out = p.inputStream.bufferedReader().readText()
        check(p.waitFor() == 0) { "openssl ${args.joinToString(" ")}: $out" }
    }

    /** A CA and a certificate it signed for 127.0.0.1 and localhost: CA, certificate, key (PEM). */
    private fun certs(name: String): Triple<Path, Path, Path> {
        fun f(x: String) = dir.resolve(x).toString()
        val ec = arrayOf("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
        openssl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=$name CA", "-keyout", f("$name-ca-key.pem"), "-out", f("$name-ca.pem"))
        openssl("req", *ec, "-subj", "/CN=$name", "-keyout", f("$name-key.pem"), "-out", f("$name.csr"))
        Files.writeString(dir.resolve("$name.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
        openssl(
            "x509", "-req", "-in", f("$name.csr"), "-CA", f("$name-ca.pem"), "-CAkey", f("$name-ca-key.pem"),
            "-CAcreateserial", "-days", "1", "-extfile", f("$name.ext"), "-out", f("$name.pem"),
        )
        return Triple(dir.resolve("$name-ca.pem"), dir.resolve("$name.pem"), dir.resolve("$name-key.pem"))
    }

    @Test
    fun httpsWithACaOfItsOwn() {
        val (ca, cert, key) = certs("server")
        FenecServer("--tls-cert", cert.toString(), "--tls-key", key.toString()).use { server ->
            assertTrue(server.url.startsWith("https://"), server.url)
            val db = Fenec.connect(server.url, sslContext = Fenec.trusting(ca))
            runBlocking {
                db.query("create collection notes (s text)")
                db.query("put notes {s: \$1}", listOf("over tls"))
                assertEquals("over tls", db.query("get notes select s").rows!![0]["s"])
            }
            // The JVM's own CAs do not know the test's.
            val e = assertThrows<FenecException> { runBlocking { Fenec.connect(server.url, timeout = 5.seconds).query("get notes") } }
            assertEquals(ErrorCode.NETWORK, e.code, e.toString())
            assertTrue(e.message!!.contains("TLS: the handshake failed"), e.message)
        }
    }

    @Test
    fun clientCertificate() {
        val (ca, cert, key) = certs("server")
        val (clientCa, clientCert, clientKey) = certs("clients")
        FenecServer("--tls-cert", cert.toString(), "--tls-key", key.toString(), "--tls-client-ca", clientCa.toString()).use { server ->
            val p12 = dir.resolve("client.p12")
            openssl("pkcs12", "-export", "-in", clientCert.toString(), "-inkey", clientKey.toString(), "-out", p12.toString(), "-passout", "pass:test")
            val ks = KeyStore.getInstance("PKCS12").apply { Files.newInputStream(p12).use { load(it, "test".toCharArray()) } }
            val kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm()).apply { init(ks, "test".toCharArray()) }
            val trust = KeyStore.getInstance(KeyStore.getDefaultType()).apply { load(null, null) }
            trust.setCertificateEntry("ca", java.security.cert.CertificateFactory.getInstance("X.509").generateCertificate(Files.newInputStream(ca)))
            val tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm()).apply { init(trust) }
            val ctx = SSLContext.getInstance("TLS").apply { init(kmf.keyManagers, tmf.trustManagers, null) }
            runBlocking { Fenec.connect(server.url, sslContext = ctx).query("create collection notes (s text)") }
            val e = assertThrows<FenecException> {
                runBlocking { Fenec.connect(server.url, timeout = 5.seconds, sslContext = Fenec.trusting(ca)).query("get notes") }
            }
            assertEquals(ErrorCode.NETWORK, e.code, e.toString())
        }
    }
}
