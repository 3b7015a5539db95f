package apitest

import "testing"

// TestFreeAddrNeverTwice: FreeAddr never answers an address it answered
// before in this process. A port is free when picked, but not yet bound:
// a cluster test picks six before starting any node, and two nodes given
// one port had one fail "address already in use"
// (TestClusterReplicaFromSnapshot, once). 2 000 picks among the ~22 000
// ports below the ephemeral range would repeat one almost surely.
func TestFreeAddrNeverTwice(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("%s answered twice", a)
		}
		seen[a] = true
	}
}
