package com.fenecdb

import org.jetbrains.kotlin.cli.common.ExitCode
import org.jetbrains.kotlin.cli.jvm.K2JVMCompiler
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.io.ByteArrayOutputStream
import java.io.File
import java.io.PrintStream
import java.nio.file.Files
import javax.tools.ToolProvider

/**
 * Every Kotlin and Java block of the README compiles against this SDK: each
 * is wrapped in a function (its imports hoisted; `db`, `jobs` and `send`
 * given), so the README cannot drift from the API.
 */
class ReadmeBlocksTest {
    private val readme = REPO.resolve("sdks/kotlin/README.md").toFile().readText()
    private val classpath = System.getProperty("java.class.path")

    private fun blocks(lang: String): List<String> =
        Regex("```$lang\\n(.*?)```", RegexOption.DOT_MATCHES_ALL).findAll(readme).map { it.groupValues[1] }.toList()

    @Test
    fun `the README's Kotlin blocks compile`() {
        // The Gradle line is Gradle's Kotlin DSL, not this SDK's code.
        val code = blocks("kotlin").filterNot { it.trimStart().startsWith("implementation(") }
        assertTrue(code.size >= 5, "Kotlin blocks: ${code.size}")
        val imports = sortedSetOf(
            "import com.fenecdb.*", "import kotlinx.coroutines.*", "import java.util.UUID",
            "import kotlin.time.Duration.Companion.seconds",
        )
        val bodies = code.mapIndexed { i, block ->
            val (imp, rest) = block.lines().partition { it.startsWith("import ") }
            imports += imp
            if (rest.any { it.startsWith("suspend fun ") }) rest.joinToString("\n")
            else {
                val jobs = if (rest.any { it.startsWith("val jobs") }) "" else "    val jobs = db.from(\"jobs\")\n"
                "@Suppress(\"UNUSED_VARIABLE\", \"NAME_SHADOWING\")\nsuspend fun readmeBlock$i(db: Client) {\n$jobs${rest.joinToString("\n")}\n}\n"
            }
        }
        val dir = Files.createTempDirectory("readme-kotlin").toFile()
        try {
            val src = File(dir, "Readme.kt")
            src.writeText("package readme\n\n${imports.joinToString("\n")}\n\nsuspend fun send(x: Any?) {}\n\n${bodies.joinToString("\n")}")
            val out = ByteArrayOutputStream()
            val code = K2JVMCompiler().exec(PrintStream(out), "-classpath", classpath, "-d", File(dir, "out").path, "-no-stdlib", "-no-reflect", "-jvm-target", "17", src.path)
            assertEquals(ExitCode.OK, code, "${src.readText()}\n$out")
        } finally {
            dir.deleteRecursively()
        }
    }

    @Test
    fun `the README's Java blocks compile`() {
        val code = blocks("java")
        assertTrue(code.size >= 2, "Java blocks: ${code.size}")
        val imports = sortedSetOf("import com.fenecdb.*;", "import java.time.Duration;", "import java.util.*;")
        val bodies = code.mapIndexed { i, block ->
            val (imp, rest) = block.lines().partition { it.startsWith("import ") }
            imports += imp
            val param = if (rest.any { it.startsWith("Client db =") }) "" else "Client db"
            "    static void block$i($param) throws Exception {\n${rest.joinToString("\n")}\n    }\n"
        }
        val dir = Files.createTempDirectory("readme-java").toFile()
        try {
            val src = File(dir, "Readme.java")
            src.writeText("${imports.joinToString("\n")}\n\nclass Readme {\n    static void send(Object x) {}\n\n${bodies.joinToString("\n")}}\n")
            val out = ByteArrayOutputStream()
            val rc = ToolProvider.getSystemJavaCompiler().run(null, out, out, "-cp", classpath, "-d", File(dir, "out").path, src.path)
            assertEquals(0, rc, "${src.readText()}\n$out")
        } finally {
            dir.deleteRecursively()
        }
    }
}
