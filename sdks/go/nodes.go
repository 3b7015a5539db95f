package fenecdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// Several nodes (docs/sdks.md, "Several nodes"; the server's side in
// docs/cluster.md): a cluster's follower refuses a write unrun with 403
// forbidden and the leader's URL in Fenec-Leader, or without it while no
// leader is known.

// headerFenecLeader is the header of a follower's 403 naming the leader
// (openapi.yaml's Forbidden answer).
const headerFenecLeader = "Fenec-Leader"

const (
	// maxFollows bounds the Fenec-Leader answers one call follows in a
	// row (with no other answer between).
	maxFollows = 3
	// firstPause and lastPause bound the pause between two full rounds of
	// the configured nodes, doubling from the first to the last.
	firstPause = 50 * time.Millisecond
	lastPause  = time.Second
)

// node is one server a client may send to.
type node struct {
	url   string // without a trailing "/"
	host  string // host:port, for messages
	https bool
}

// nodes are a client's configured servers and the one its calls go to now,
// shared by every copy [Client.Wait] makes.
type nodes struct {
	list    []*node
	current atomic.Pointer[node]
}

// parseNode reads one server URL; "" when it is not one.
func parseNode(raw string) (*node, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	host := u.Host
	if u.Port() == "" {
		host += map[string]string{"http": ":80", "https": ":443"}[u.Scheme]
	}
	return &node{url: strings.TrimRight(raw, "/"), host: host, https: u.Scheme == "https"}, true
}

// parseNodes reads Connect's argument: one URL, or several separated by
// commas (spaces around them are dropped). A bad one is an error naming it
// and its position; duplicates are dropped.
func parseNodes(raw string) (*nodes, error) {
	parts := strings.Split(raw, ",")
	ns := &nodes{}
	seen := map[string]bool{}
	for i, p := range parts {
		if len(parts) > 1 {
			p = strings.TrimSpace(p)
		}
		n, ok := parseNode(p)
		if !ok {
			if len(parts) == 1 {
				return nil, fmt.Errorf("fenecdb: %q is not a server URL: it needs the scheme http or https and a host, as in http://127.0.0.1:8080", raw)
			}
			return nil, fmt.Errorf("fenecdb: URL %d of %d, %q, is not a server URL: each needs the scheme http or https and a host, as in http://10.0.0.1:8080,http://10.0.0.2:8080", i+1, len(parts), p)
		}
		if !seen[n.url] {
			seen[n.url] = true
			ns.list = append(ns.list, n)
		}
	}
	ns.current.Store(ns.list[0])
	return ns, nil
}

// after answers the configured node after n, round robin; the first when
// n is not configured (a leader a follower named).
func (ns *nodes) after(n *node) *node {
	for i, m := range ns.list {
		if m.url == n.url {
			return ns.list[(i+1)%len(ns.list)]
		}
	}
	return ns.list[0]
}

// dialFailed reports whether err is a connection that could not be made:
// nothing was sent, so the request did not run.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// attempt is one request to one node: its answer, or the error it failed
// with.
type attempt func(ctx context.Context, t *apiTransport) (apiReply, error)

// sent is an answer and the node that sent it.
type sent struct {
	apiReply
	host string
}

// route sends a request by the rules of docs/sdks.md, "Several nodes", all
// under reqCtx (the call's deadline; ctx is the caller's): to the current
// node; on a 403 naming the leader, the same request to the leader (at
// most maxFollows times in a row, never from https to http), which becomes the
// current node; with several nodes configured, on a connection that could
// not be made or a 403 naming no leader, to the next node, pausing between
// full rounds, until the deadline, which answers the last such error.
func (c *Client) route(ctx, reqCtx context.Context, what, bound string, do attempt) (sent, error) {
	ns := c.nodes
	several := len(ns.list) > 1
	n := ns.current.Load()
	follows, missed := 0, 0
	pause := firstPause
	var unreachable map[string]bool // nodes this call could not connect to
	var last error
	for {
		t := *c.t
		t.baseURL = n.url
		reply, err := do(reqCtx, &t)
		switch {
		case err != nil:
			if !several || ctx.Err() != nil || reqCtx.Err() != nil || !dialFailed(err) {
				return sent{}, sendFailure(ctx, reqCtx, what, n.host, bound, err)
			}
			last = sendFailure(ctx, reqCtx, what, n.host, bound, err)
			if unreachable == nil {
				unreachable = map[string]bool{}
			}
			unreachable[n.url] = true
		case reply.status < 200 || reply.status > 299:
			e := refusal(n.host, what, reply.status, reply.body)
			if reply.status != 403 || e.Code != CodeForbidden {
				return sent{}, e
			}
			e.Leader = reply.header.Get(headerFenecLeader)
			if e.Leader == "" {
				if !several {
					return sent{}, e
				}
				last = e // no leader is known now: another node may know one
				break
			}
			to, ok := parseNode(e.Leader)
			if !ok || follows == maxFollows || (n.https && !to.https) {
				return sent{}, e
			}
			if unreachable[to.url] {
				// A follower names the leader it last heard until it
				// notices the leader gone: as good as no leader known.
				last = e
				break
			}
			follows++
			n = to
			ns.current.Store(n)
			continue
		default:
			return sent{reply, n.host}, nil
		}
		// This node cannot have run the request: the next one. The
		// follows counted are those in a row: a leader named the moment it
		// is elected refuses writes until it has applied the earlier
		// terms' (docs/cluster.md), and the node that named it names it
		// again; the pauses between rounds bound those.
		follows = 0
		if missed++; missed >= len(ns.list) {
			missed = 0
			timer := time.NewTimer(pause)
			select {
			case <-timer.C:
			case <-reqCtx.Done():
				timer.Stop()
				if ctx.Err() != nil {
					return sent{}, fmt.Errorf("fenecdb: %s: %w", what, context.Cause(ctx))
				}
				return sent{}, last
			}
			pause = min(2*pause, lastPause)
		}
		n = ns.after(n)
		ns.current.Store(n)
	}
}
