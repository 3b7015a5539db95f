package fenecdb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Change is one committed write of the change stream (docs/changes.md,
// "The change stream").
type Change struct {
	Position   int64  `json:"position"`
	Collection string `json:"collection"`
	// Op is put (an insert or an update) or delete.
	Op string `json:"op"`
	ID int64  `json:"id"`
	// Row is a put's document as written (JSON); nil for a delete, and on
	// a server with no file.
	Row json.RawMessage `json:"row,omitempty"`
}

// ChangeBatch is a read's answer: the changes after Position, and Next,
// the position to acknowledge once they are handled.
type ChangeBatch struct {
	Consumer string   `json:"consumer"`
	Position int64    `json:"position"`
	Next     int64    `json:"next"`
	Changes  []Change `json:"changes"`
}

// Consumer is a named consumer of the change stream, on one collection or
// on all ([Client.Consumer]).
type Consumer struct {
	db         *Client
	name       string
	collection string
}

// Consumer returns the consumer called name on collection ("" for every
// collection): the committed writes in commit order, read in batches and
// acknowledged, so each is handled at least once.
func (c *Client) Consumer(name, collection string) *Consumer {
	return &Consumer{db: c, name: name, collection: collection}
}

// Read returns the changes after the consumer's acknowledged position, at
// most limit (0: the server's default, 100), the read held up to wait
// while there are none. A read moves nothing: read again without
// [Consumer.Ack], the same changes come back. A second read under the name
// while one runs is [CodeConsumerBusy] (409); a position older than the
// oldest change kept is [CodeChangesGone] (410).
func (k *Consumer) Read(ctx context.Context, limit int, wait time.Duration) (ChangeBatch, error) {
	q := url.Values{"consumer": {k.name}}
	if k.collection != "" {
		q.Set("collection", k.collection)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		q.Set("wait", strconv.FormatInt(wait.Milliseconds(), 10))
	}
	var b ChangeBatch
	err := k.call(ctx, http.MethodGet, "/_changes?"+q.Encode(), nil, wait, &b)
	return b, err
}

// Ack moves the consumer's position to position (a batch's Next): durable
// once it returns.
func (k *Consumer) Ack(ctx context.Context, position int64) error {
	body, _ := json.Marshal(map[string]any{"consumer": k.name, "position": position})
	return k.call(ctx, http.MethodPost, "/_changes/ack", body, 0, nil)
}

// Batches reads batch after batch, each read held up to wait while there
// is none, and yields those with changes. A batch is acknowledged when the
// loop asks for the next, so a loop that stops early, or a process that
// dies, reads it again. An error is yielded once and ends it.
func (k *Consumer) Batches(ctx context.Context, limit int, wait time.Duration) iter.Seq2[ChangeBatch, error] {
	return func(yield func(ChangeBatch, error) bool) {
		for {
			b, err := k.Read(ctx, limit, wait)
			if err != nil {
				yield(ChangeBatch{}, err)
				return
			}
			if len(b.Changes) == 0 {
				continue
			}
			if !yield(b, nil) {
				return
			}
			if err := k.Ack(ctx, b.Next); err != nil {
				yield(ChangeBatch{}, err)
				return
			}
		}
	}
}

// call sends one request to the client's node, bounded by the client's
// timeout plus wait, and decodes a 2xx answer into out.
func (k *Consumer) call(ctx context.Context, method, path string, body []byte, wait time.Duration, out any) error {
	base := k.db.Node()
	host := hostOf(base)
	what := method + " " + path
	if k.db.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, k.db.timeout+wait)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if k.db.t.token != "" {
		req.Header.Set("Authorization", "Bearer "+k.db.t.token)
	}
	resp, err := k.db.t.client.Do(req)
	if err != nil {
		code := CodeNetwork
		if errors.Is(err, context.DeadlineExceeded) {
			code = CodeTimeout
		}
		return &Error{Code: code, At: -1, Cause: err, Message: fmt.Sprintf("%s: %s: %v", what, host, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return &Error{Code: CodeNetwork, At: -1, Cause: err, Message: fmt.Sprintf("%s: reading the answer of %s: %v", what, host, err)}
	}
	if resp.StatusCode/100 != 2 {
		e := refusal(host, what, resp.StatusCode, b)
		if l := resp.Header.Get("Fenec-Leader"); l != "" && e.Code == CodeForbidden {
			e.Leader = l
		}
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return unexpected(host, what, resp.StatusCode, b)
	}
	return nil
}
