package fenecdb_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestInstallAsAUser makes a module in a temporary folder outside the
// repository that requires the SDK (one replace to its folder, as a user
// trying a local copy writes), puts each go block of README.md in it as a
// program of its own, and runs go mod tidy, go vet and go build there: a
// user's first commands. It needs the module proxy only for what the SDK
// requires (nothing but the standard library).
func TestInstallAsAUser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module outside the repository")
	}
	sdk, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("go.mod")
	if err != nil || regexp.MustCompile(`(?m)^\s*replace`).Match(gomod) {
		t.Fatalf("the SDK's go.mod has a replace directive, which Go ignores in a dependency (%v)", err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)\n```go\n(.*?)\n```\n").FindAllSubmatch(readme, -1)
	if len(blocks) == 0 {
		t.Fatal("no go block in README.md")
	}
	dir := t.TempDir()
	// The user's module declares the oldest Go the SDK supports: its own
	// go directive.
	goLine := regexp.MustCompile(`(?m)^go \S+$`).Find(gomod)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/readme\n\n"+string(goLine)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The README's first install line, as a user types it from a checkout.
	install := regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindSubmatch(readme)
	if install == nil || !strings.HasPrefix(string(install[1]), "go mod edit ") {
		t.Fatal("README.md's first sh block is not the go mod edit line")
	}
	line := strings.ReplaceAll(string(install[1]), "/path/to/fenec/sdks/go", sdk)
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README.md's install line in a user's module: %v\n%s", err, out)
	}
	for i, b := range blocks {
		if !strings.HasPrefix(string(b[1]), "package main\n") {
			t.Fatalf("README.md's go block %d is not a whole program (package main)", i+1)
		}
		p := filepath.Join(dir, fmt.Sprintf("block%d", i+1), "main.go")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b[1], 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"vet", "./..."}, {"build", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in a user's module: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	sum, _ := os.ReadFile(filepath.Join(dir, "go.sum"))
	if len(strings.TrimSpace(string(sum))) != 0 {
		t.Fatalf("the SDK brought dependencies to a user's module:\n%s", sum)
	}
}

// TestLicenseCopies: the SDKs whose packages carry the license (the Go
// module's zip, the npm tarball, the wheel) hold the repository's LICENSE
// byte for byte, since a package cannot reach the file above its folder.
func TestLicenseCopies(t *testing.T) {
	root, err := os.ReadFile("../../LICENSE")
	if err != nil || !strings.Contains(string(root), "Apache License") {
		t.Fatalf("the repository's LICENSE: %v", err)
	}
	for _, sdk := range []string{"go", "js", "python"} {
		b, err := os.ReadFile(filepath.Join("..", sdk, "LICENSE"))
		if err != nil || string(b) != string(root) {
			t.Errorf("sdks/%s/LICENSE is not the repository's LICENSE (%v)", sdk, err)
		}
	}
}
