# Reads `go test -json` and prints what plain `go test` would: each
# package's ok/FAIL line, build errors, and the output of failed tests only.
# Ends with one line of counts of top-level tests (subtests not counted):
#   go tests: N passed, N failed, N skipped
# Lines that are not JSON (go vet, a crash of go itself) pass through.
# Plain awk (no gawk extensions): scripts/test.sh runs where Go is not.

function field(line, name,    re, s) {
  re = "\"" name "\":\""
  s = index(line, re)
  if (s == 0) return ""
  line = substr(line, s + length(re))
  # The value ends at the first quote not escaped by a backslash.
  out = ""
  while (length(line) > 0) {
    c = substr(line, 1, 1)
    if (c == "\\") { out = out substr(line, 1, 2); line = substr(line, 3); continue }
    if (c == "\"") break
    out = out c; line = substr(line, 2)
  }
  return out
}
function unescape(s,    out, c, n) {
  out = ""
  while (length(s) > 0) {
    c = substr(s, 1, 1)
    if (c != "\\") { out = out c; s = substr(s, 2); continue }
    n = substr(s, 2, 1)
    if (n == "n") out = out "\n"
    else if (n == "t") out = out "\t"
    else if (n == "r") out = out ""
    else if (n == "u") {
      hex = substr(s, 3, 4)
      if (hex == "003c") out = out "<"; else if (hex == "003e") out = out ">"; else if (hex == "0026") out = out "&"; else out = out "?"
      s = substr(s, 7); continue
    } else out = out n
    s = substr(s, 3)
  }
  return out
}
/^\{.*"Action":/ {
  action = field($0, "Action")
  test = field($0, "Test")
  pkg = field($0, "Package")
  key = pkg " " test
  if (action == "output" || action == "build-output") {
    o = unescape(field($0, "Output"))
    if (test == "") { printf "%s", o; fflush() }
    else buf[key] = buf[key] o
    next
  }
  if (test != "" && (action == "pass" || action == "fail" || action == "skip")) {
    if (action == "fail") { printf "%s", buf[key]; fflush() }
    delete buf[key]
    if (index(test, "/") == 0) {
      if (action == "pass") passed++
      else if (action == "fail") failed++
      else skipped++
    }
  }
  next
}
{ print; fflush() }
END { printf "go tests: %d passed, %d failed, %d skipped\n", passed, failed, skipped }
