// Package history checks a history of queue operations recorded by the
// clients of a cluster under faults (docs/cluster.md, Tests), in the
// manner of Jepsen: each operation as its client saw it — invoked, then
// ok, fail (certainly not done) or info (outcome unknown) — and the jobs'
// final state read from the survivors.
package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// Op is one completed operation of a client.
type Op struct {
	Client int    `json:"client"`
	Kind   string `json:"kind"`   // put, claim, ack, final
	Result string `json:"result"` // ok, fail, info
	// put: the job's id when ok. claim: the jobs it was answered. ack:
	// the one job. final: every job left in the queue.
	Jobs []int64 `json:"jobs,omitempty"`
	// claim: the owner it wrote, and each job's lease as the server set
	// it, [start, end) in the server's ms.
	Owner  string     `json:"owner,omitempty"`
	Leases [][2]int64 `json:"leases,omitempty"`
	Invoke int64      `json:"invoke"` // the client's ns when sent
	Done   int64      `json:"done"`   // the client's ns when answered
}

// Violation is one broken promise.
type Violation string

// Check returns every broken promise of a history: an acknowledged put
// whose job is neither in the final state nor possibly acked; a job
// answered to two claims whose leases overlap; a job acked done twice; an
// ack answered ok for a job its owner was never answered by a claim.
func Check(ops []Op) []Violation {
	var out []Violation
	final := map[int64]bool{}
	haveFinal := false
	okPut := map[int64]bool{}
	mayAck := map[int64]bool{} // acks ok or info: the job may be gone
	okAcks := map[int64]int{}
	type lease struct {
		owner      string
		start, end int64
	}
	claims := map[int64][]lease{}
	owners := map[string]map[int64]bool{} // owner → jobs it was answered
	for _, op := range ops {
		switch op.Kind {
		case "final":
			haveFinal = true
			for _, id := range op.Jobs {
				final[id] = true
			}
		case "put":
			if op.Result == "ok" {
				for _, id := range op.Jobs {
					okPut[id] = true
				}
			}
		case "ack":
			if op.Result == "ok" || op.Result == "info" {
				for _, id := range op.Jobs {
					mayAck[id] = true
				}
			}
			if op.Result == "ok" {
				for _, id := range op.Jobs {
					okAcks[id]++
					if !owners[op.Owner][id] {
						out = append(out, Violation(fmt.Sprintf("job %d acked ok by %s, which no claim answered it to", id, op.Owner)))
					}
				}
			}
		case "claim":
			if op.Result != "ok" {
				continue
			}
			if len(op.Leases) != len(op.Jobs) {
				out = append(out, Violation(fmt.Sprintf("claim by %s: %d jobs but %d leases", op.Owner, len(op.Jobs), len(op.Leases))))
				continue
			}
			if owners[op.Owner] == nil {
				owners[op.Owner] = map[int64]bool{}
			}
			for i, id := range op.Jobs {
				owners[op.Owner][id] = true
				claims[id] = append(claims[id], lease{op.Owner, op.Leases[i][0], op.Leases[i][1]})
			}
		default:
			out = append(out, Violation(fmt.Sprintf("an operation of unknown kind %q", op.Kind)))
		}
	}
	if !haveFinal {
		out = append(out, "no final read: the history is incomplete")
	}
	var ids []int64
	for id := range okPut {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		if haveFinal && !final[id] && !mayAck[id] {
			out = append(out, Violation(fmt.Sprintf("job %d: its put was acknowledged, and it is gone though no ack was sent for it", id)))
		}
	}
	ids = ids[:0]
	for id := range claims {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		ls := claims[id]
		sort.Slice(ls, func(i, j int) bool { return ls[i].start < ls[j].start })
		for i := 1; i < len(ls); i++ {
			if ls[i].start < ls[i-1].end && ls[i].owner != ls[i-1].owner {
				out = append(out, Violation(fmt.Sprintf("job %d answered to %s (lease %d..%d) and to %s (lease %d..%d): the leases overlap",
					id, ls[i-1].owner, ls[i-1].start, ls[i-1].end, ls[i].owner, ls[i].start, ls[i].end)))
			}
		}
		if n := okAcks[id]; n > 1 {
			out = append(out, Violation(fmt.Sprintf("job %d acked done %d times", id, n)))
		}
	}
	for id, n := range okAcks {
		if len(claims[id]) == 0 && n > 0 {
			out = append(out, Violation(fmt.Sprintf("job %d acked though never claimed", id)))
		}
	}
	return out
}

// Read reads a history written one JSON Op a line.
func Read(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	return ops, sc.Err()
}
