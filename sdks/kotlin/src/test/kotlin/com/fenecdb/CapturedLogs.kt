package com.fenecdb

import org.slf4j.ILoggerFactory
import org.slf4j.IMarkerFactory
import org.slf4j.Logger
import org.slf4j.Marker
import org.slf4j.event.Level
import org.slf4j.helpers.BasicMarkerFactory
import org.slf4j.helpers.LegacyAbstractLogger
import org.slf4j.helpers.MessageFormatter
import org.slf4j.helpers.NOPMDCAdapter
import org.slf4j.spi.MDCAdapter
import org.slf4j.spi.SLF4JServiceProvider
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.CopyOnWriteArrayList

/**
 * The tests' SLF4J backend: it keeps every event (logger, level, message,
 * throwable) in [events], so a test reads what the worker logged, and
 * prints each to stderr as a backend would.
 */
class CapturedLogs : SLF4JServiceProvider {
    data class Event(val logger: String, val level: Level, val message: String, val error: Throwable?)

    companion object {
        val events = CopyOnWriteArrayList<Event>()
    }

    private class Captured(name: String) : LegacyAbstractLogger() {
        init {
            this.name = name
        }

        override fun isTraceEnabled() = false
        override fun isDebugEnabled() = false
        override fun isInfoEnabled() = true
        override fun isWarnEnabled() = true
        override fun isErrorEnabled() = true
        override fun getFullyQualifiedCallerName(): String? = null

        override fun handleNormalizedLoggingCall(level: Level, marker: Marker?, pattern: String?, args: Array<out Any?>?, error: Throwable?) {
            val text = MessageFormatter.basicArrayFormat(pattern, args)
            events += Event(name, level, text, error)
            System.err.println("[$level] $name: $text${error?.let { " ($it)" } ?: ""}")
        }
    }

    private val loggers = ConcurrentHashMap<String, Logger>()
    private val factory = ILoggerFactory { name -> loggers.computeIfAbsent(name) { Captured(it) } }
    private val markers = BasicMarkerFactory()
    private val mdc = NOPMDCAdapter()

    override fun getLoggerFactory(): ILoggerFactory = factory
    override fun getMarkerFactory(): IMarkerFactory = markers
    override fun getMDCAdapter(): MDCAdapter = mdc
    override fun getRequestedApiVersion(): String = "2.0.99"
    override fun initialize() {}
}
