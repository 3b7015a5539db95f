package fenecdb

import (
	"bufio"
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
	"strings"
	"time"
)

// LiveEvent is one event of a live query (docs/changes.md, "Live
// queries"): its name, the commit position it carries (the SSE id), and
// its data, decoded into the fields its name uses.
//
// Rows are not typed by the collection's fields as [Result] rows are: their
// values are as JSON decodes them, numbers as [json.Number].
type LiveEvent struct {
	// Name is rows, insert, update, delete, reset, gap or closing.
	Name string
	// Position is the position of the commit that made the event.
	Position int64
	// Rows are a rows or reset event's rows (at most 1 000 an event).
	Rows []Row
	// Last is set on the last rows or reset event of a series.
	Last bool
	// Row is an insert or update event's row, as it is now.
	Row *Row
	// ID is a delete event's id: a row the client was sent that is gone,
	// or no longer matches, or may no longer be read.
	ID int64
	// Oldest is a gap event's oldest position kept.
	Oldest int64
	// Reason is a closing event's reason: shutdown, behind, token
	// expired, or the query failed: ….
	Reason string
	// Data is the event's data as sent.
	Data json.RawMessage
}

// WatchOption configures a live query ([Query.Watch], [Client.Watch]).
type WatchOption func(*watchConfig)

type watchConfig struct {
	last    int64
	resume  bool
	opened  bool // the last request was answered 200: its stream began
	retries int
	delay   time.Duration
}

// WatchAfter resumes a live query after position (sent as Last-Event-ID
// on the first request).
func WatchAfter(position int64) WatchOption {
	return func(c *watchConfig) { c.last, c.resume = position, true }
}

// WatchRetries sets how many failed reconnects in a row end the live
// query with a [CodeNetwork] error (default 10), and the pause between
// them (default 500 ms).
func WatchRetries(n int, pause time.Duration) WatchOption {
	return func(c *watchConfig) { c.retries, c.delay = n, pause }
}

// Watch follows the read as a live query over Server-Sent Events
// (docs/changes.md): its rows now, then each insert, update and delete of
// a row it matches, until ctx is done. Only Where and Select may be set:
// the server refuses the rest (400).
//
// A dropped connection, or a closing event (the server shutting down, or
// the client fallen behind), is followed by a reconnect with Last-Event-ID,
// so no change is missed: the server sends nothing again, or a reset with
// the rows as they are now. A refusal (400, 401, 403, 404) is yielded as
// an [*Error] and ends it; so is ctx's error.
//
//	for ev, err := range db.From("jobs").Where("owner", "w1").Watch(ctx) {
//		if err != nil { return err }
//		…
//	}
func (c Query) Watch(ctx context.Context, opts ...WatchOption) iter.Seq2[LiveEvent, error] {
	s, err := c.RenderRows()
	if err != nil {
		return func(yield func(LiveEvent, error) bool) { yield(LiveEvent{}, err) }
	}
	return c.db.Watch(ctx, s, opts...)
}

// Watch follows a get statement as a live query: see [Query.Watch].
func (c *Client) Watch(ctx context.Context, s Statement, opts ...WatchOption) iter.Seq2[LiveEvent, error] {
	return func(yield func(LiveEvent, error) bool) {
		ps, err := params(s.Params)
		if err != nil {
			yield(LiveEvent{}, err)
			return
		}
		body, err := json.Marshal(apiQueryRequest{Query: s.Query, Params: ps})
		if err != nil {
			yield(LiveEvent{}, err)
			return
		}
		c.follow(ctx, http.MethodPost, "/query", body, opts, yield)
	}
}

// WatchCollection follows GET /<collection>/changes?where=…&select=…:
// the same live query, its condition FenecQL text ("" for every row) and
// its fields a comma-separated list ("" for every field).
func (c *Client) WatchCollection(ctx context.Context, collection, where, sel string, opts ...WatchOption) iter.Seq2[LiveEvent, error] {
	q := url.Values{}
	if where != "" {
		q.Set("where", where)
	}
	if sel != "" {
		q.Set("select", sel)
	}
	path := "/" + url.PathEscape(collection) + "/changes"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return func(yield func(LiveEvent, error) bool) {
		c.follow(ctx, http.MethodGet, path, nil, opts, yield)
	}
}

// follow sends the live query's request, again after each dropped
// connection, and yields its events.
func (c *Client) follow(ctx context.Context, method, path string, body []byte, opts []WatchOption, yield func(LiveEvent, error) bool) {
	cfg := watchConfig{retries: 10, delay: 500 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	failures := 0
	for {
		base := c.Node()
		cfg.opened = false
		err := c.stream(ctx, method, base+path, body, &cfg, yield)
		if errors.Is(err, errStopped) {
			return
		}
		if ctx.Err() != nil {
			yield(LiveEvent{}, ctx.Err())
			return
		}
		var fe *Error
		if errors.As(err, &fe) {
			// A refusal is final, but for an answer that may succeed later
			// (a server shutting down answers 503 unavailable): that is
			// tried again as a dropped connection is, within the retries.
			if !isRetryable(fe) {
				yield(LiveEvent{}, fe)
				return
			}
			fe.Retryable = true
		}
		if cfg.opened {
			failures = 0 // the stream began, then ended or dropped: reconnect at once
			continue
		}
		failures++
		if failures > cfg.retries && fe != nil {
			yield(LiveEvent{}, fe) // the last try was answered: its own error
			return
		}
		if failures > cfg.retries {
			yield(LiveEvent{}, &Error{Code: CodeNetwork, At: -1, Cause: err,
				Message: fmt.Sprintf("the live query at %s could not reconnect: %v", hostOf(base), err)})
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(cfg.delay):
		}
	}
}

// errStopped: the caller stopped iterating.
var errStopped = errors.New("stopped")

// stream makes one request and yields its events; it returns nil when the
// stream ended after it began, errStopped when yield said stop, an *Error
// for a refusal, and the network's error otherwise.
func (c *Client) stream(ctx context.Context, method, u string, body []byte, cfg *watchConfig, yield func(LiveEvent, error) bool) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return &Error{Code: CodeNetwork, At: -1, Cause: err, Message: err.Error()}
	}
	req.Header.Set("Accept", "text/event-stream")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.t.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.t.token)
	}
	if cfg.resume {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(cfg.last, 10))
	}
	resp, err := c.t.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		e := refusal(hostOf(u), "the live query", resp.StatusCode, b)
		if l := resp.Header.Get("Fenec-Leader"); l != "" && e.Code == CodeForbidden {
			e.Leader = l
		}
		return e
	}
	cfg.opened = true
	r := bufio.NewReader(resp.Body)
	var name, id string
	var data []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		switch {
		case line == "":
			if name == "" {
				continue
			}
			ev, err := liveEvent(name, id, strings.Join(data, "\n"))
			name, id, data = "", "", nil
			if err != nil {
				yield(LiveEvent{}, err)
				return errStopped
			}
			if ev.Position > 0 {
				cfg.last, cfg.resume = ev.Position, true
			}
			if !yield(ev, nil) {
				return errStopped
			}
		case strings.HasPrefix(line, ":"): // a comment: heartbeat, resumed
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "event":
				name = v
			case "id":
				id = v
			case "data":
				data = append(data, v)
			}
		}
	}
}

// liveEvent decodes one event's data into the fields its name uses.
func liveEvent(name, id, data string) (LiveEvent, error) {
	ev := LiveEvent{Name: name, Data: json.RawMessage(data)}
	if id != "" {
		n, err := strconv.ParseInt(id, 10, 64)
		if err != nil {
			return ev, fmt.Errorf("fenecdb: a live query's event id %q is not a position", id)
		}
		ev.Position = n
	}
	if data == "" {
		return ev, nil
	}
	var d struct {
		Rows   []json.RawMessage `json:"rows"`
		Row    json.RawMessage   `json:"row"`
		Last   bool              `json:"last"`
		ID     int64             `json:"id"`
		Oldest int64             `json:"oldest"`
		Reason string            `json:"reason"`
	}
	if err := json.Unmarshal([]byte(data), &d); err != nil {
		return ev, fmt.Errorf("fenecdb: a live query's %s event is not JSON: %w", name, err)
	}
	ev.Last, ev.ID, ev.Oldest, ev.Reason = d.Last, d.ID, d.Oldest, d.Reason
	one := func(raw json.RawMessage) (Row, error) { return parseRow(raw) }
	for _, raw := range d.Rows {
		row, err := one(raw)
		if err != nil {
			return ev, err
		}
		ev.Rows = append(ev.Rows, row)
	}
	if len(d.Row) > 0 && string(d.Row) != "null" {
		row, err := one(d.Row)
		if err != nil {
			return ev, err
		}
		ev.Row = &row
	}
	return ev, nil
}

// hostOf is the host:port of a URL, for messages.
func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return u
}
