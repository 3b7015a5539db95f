package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// changesConfig is -mode changes: the figures of docs/changes.md's live
// queries and change stream, each loop bounded in count and in time.
type changesConfig struct {
	bin, dir, note string
	install        bool
	subs           []int // live queries on one query, per latency cell
	different      int   // live queries on as many queries, one cell
	writes         int   // puts per latency cell, one at a time
	idle           int   // idle live queries for the memory figure
	stream         int   // changes the stream throughput reads
	batch          int   // rows per put (Fenec) or XADDs per pipeline (Redis)
	limit          time.Duration
}

// latencyCell is one row of the write → event table.
type latencyCell struct {
	what         string
	subs, match  int
	event, put   []time.Duration
	cpuPerWrite  time.Duration // the server's CPU per put, over the cell
	cpuPerSubDel time.Duration // (cpuPerWrite - the cell without subscribers) / matching subscribers
}

func runChanges(c *changesConfig, out string) error {
	tmp, err := os.MkdirTemp(c.dir, "changesbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	c.dir = tmp
	if c.install {
		if err := ensureRedis(); err != nil {
			return err
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	var b strings.Builder
	fmt.Fprintf(&b, "# Changes as they land: live queries and the change stream\n\n")
	fmt.Fprintf(&b, "`make changes-bench` (bench/cmd/queuebench, `-mode changes`), %s, on %s (%d cores, %.0f GiB, %s), fenec %s; load average before the run %s.  \n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), cpuModel(), runtime.NumCPU(), memGiB(), osName(), fenecVersion(), strings.Join(strings.Fields(string(load))[:3], " "))
	fmt.Fprintf(&b, "Command: `cd bench && go run ./cmd/queuebench %s`.\n", shellArgs(os.Args[1:]))
	if c.note != "" {
		fmt.Fprintf(&b, "\n%s\n", c.note)
	}
	b.WriteString("\nEvery subscriber and client is a goroutine of the benchmark's process, over HTTP on loopback, on the same cores as the server: the figures are an upper bound, and their shape is what to read.\n")

	// Memory per idle live query.
	fmt.Fprintf(os.Stderr, "queuebench: %d idle live queries…\n", c.idle)
	before, after, err := c.idleMemory()
	if err != nil {
		return fmt.Errorf("idle live queries: %w", err)
	}
	fmt.Fprintf(&b, "\n## Memory per idle live query\n\n")
	fmt.Fprintf(&b, "A fresh `fenec serve`; %s open, `get msgs where room = <k> select text`, each on its own room and its own connection, none written to. Resident memory (/proc statm) before them %.1f MiB, with them %.1f MiB: **%.1f KiB per idle live query** (its connection, goroutine, buffers and subscription).\n",
		count(c.idle), mib(before), mib(after), float64(after-before)/float64(c.idle)/1024)

	// Write → event, and CPU per write per subscriber.
	fmt.Fprintf(os.Stderr, "queuebench: write → event…\n")
	base, err := c.latency("no live query", 0, true)
	if err != nil {
		return err
	}
	cells := []*latencyCell{base}
	for _, n := range c.subs {
		cell, err := c.latency(fmt.Sprintf("%s, the same query", count(n)), n, true)
		if err != nil {
			return err
		}
		cells = append(cells, cell)
	}
	if c.different > 0 {
		cell, err := c.latency(fmt.Sprintf("%s, each its own room", count(c.different)), c.different, false)
		if err != nil {
			return err
		}
		cells = append(cells, cell)
	}
	for _, cell := range cells[1:] {
		cell.cpuPerSubDel = (cell.cpuPerWrite - base.cpuPerWrite) / time.Duration(cell.subs)
	}
	// /proc counts CPU in ticks of 10 ms: over n puts, a difference below
	// two ticks (one for each cell) is noise.
	tick := 2 * 10 * time.Millisecond / time.Duration(max(c.writes, 1))
	fmt.Fprintf(&b, "\n## Write → event\n\n")
	fmt.Fprintf(&b, "A fresh `fenec serve --sync always` per row; live queries `get msgs where room = <k> select text` over `POST /query` with `Accept: text/event-stream`; then %d puts one at a time (`put msgs {room: 0, …}`), each timed from its request to the moment each subscriber its row matches has read its event. Server CPU: the server process's user + system time (/proc, in 10 ms ticks: below about 10 ms ÷ puts it is noise) over the puts, per put; per subscriber: less the row without live queries, divided by the live queries open (every one is woken by each put on its collection, matching or not).\n\n", c.writes)
	b.WriteString("| live queries | the put matches | event p50 | event p99 | put answered p50 | server CPU per put | CPU per put per live query |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, cell := range cells {
		ev50, ev99, per := "–", "–", "–"
		if cell.subs > 0 {
			ev50, ev99 = durMS(pctl(cell.event, 0.5)), durMS(pctl(cell.event, 0.99))
			per = fmt.Sprintf("%.1f µs", float64(cell.cpuPerSubDel.Nanoseconds())/1000)
			if cell.cpuPerWrite-base.cpuPerWrite < tick {
				per = fmt.Sprintf("below %.1f µs (the ticks' resolution)", float64((tick/time.Duration(cell.subs)).Nanoseconds())/1000)
			}
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %.0f µs | %s |\n", cell.what, cell.match, ev50, ev99, durMS(pctl(cell.put, 0.5)),
			float64(cell.cpuPerWrite.Nanoseconds())/1000, per)
	}

	b.WriteString(`
- An event can reach its subscriber before the put is answered: the put's
  answer waits for the fsync, the live query reads the row once it is
  committed in memory (as any read would see it).
- Each live query reads its rows again on every commit to its collection,
  so 1 000 queries on different rooms cost 1 000 small reads per put
  though one matches: that is the per-live-query CPU of the last row. The
  put's own answer slows with them because the cores are shared, not
  because the writer waits for a subscriber (it hands each a note on a
  bounded buffer, and drops one that falls 256 commits behind).
`)

	// The change stream beside Redis Streams.
	fmt.Fprintf(os.Stderr, "queuebench: change stream and Redis Streams…\n")
	fw, fr, err := c.fenecStream()
	if err != nil {
		return fmt.Errorf("change stream: %w", err)
	}
	rs, err := startRedis(c.dir, "always")
	if err != nil {
		return err
	}
	rw, rr, err := c.redisStream(rs.rdb)
	rs.stop()
	if err != nil {
		return fmt.Errorf("redis streams: %w", err)
	}
	fmt.Fprintf(&b, "\n## The change stream beside Redis Streams\n\n")
	fmt.Fprintf(&b, "Both durable before they answer: `fenec serve --sync always`, `redis-server %s --appendonly yes --appendfsync always`. Writes: %s messages, %d per round trip — one `put msgs [ … ]` of %d rows (one commit), against a pipeline of %d `XADD`s. Reads: one consumer takes them all, %d per read, acknowledging each read before the next — `GET /_changes?consumer=c&limit=%d` then `POST /_changes/ack`, against `XREADGROUP … COUNT %d` then `XACK` of its ids.\n\n",
		rs.version, count(c.stream), c.batch, c.batch, c.batch, 1000, 1000, 1000)
	b.WriteString("| | written per s | read and acknowledged per s |\n| --- | --- | --- |\n")
	fmt.Fprintf(&b, "| Fenec change stream | %s | %s |\n", count(int(fw)), count(int(fr)))
	fmt.Fprintf(&b, "| Redis Streams | %s | %s |\n", count(int(rw)), count(int(rr)))
	b.WriteString("\nThe consumer killed mid-stream is a test rather than a figure: `TestChangeStreamConsumerCrashes` (server/cmd/fenec: 20 deaths while 4 writers write 400 puts; every write handled once, in order, none skipped).\n")

	if out == "" {
		fmt.Print(b.String())
		return nil
	}
	return os.WriteFile(out+"/changes.md", []byte(b.String()), 0o644)
}

// shellArgs quotes the arguments that need it, for a command to paste.
func shellArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = a
		if strings.ContainsAny(a, " '\"*`$") {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func durMS(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func pctl(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[int(q*float64(len(ds)-1))]
}

// sseClient is for live queries: no timeout, one connection each.
func sseClient(n int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n + 4, MaxConnsPerHost: 0}}
}

// subscribe opens `get msgs where room = <room> select text` as a live
// query; ready is told once its first rows came, and each later event's
// text goes to events with the moment it was read. It returns when the stream ends or ctx does.
func subscribe(ctx context.Context, client *http.Client, url string, room int, ready func(error), events chan<- arrival) {
	body := fmt.Sprintf(`{"query": "get msgs where room = %d select text"}`, room)
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/query", strings.NewReader(body))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		ready(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		ready(fmt.Errorf("live query: %s", resp.Status))
		return
	}
	sc := bufio.NewScanner(resp.Body)
	first := true
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if first {
			first = false
			ready(nil)
			continue
		}
		var ev struct {
			Row struct {
				Text string `json:"text"`
			} `json:"row"`
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Row.Text != "" && events != nil {
			select {
			case events <- arrival{ev.Row.Text, time.Now()}:
			case <-ctx.Done():
				return
			}
		}
	}
	if first {
		ready(errors.New("live query: the stream ended before its first rows"))
	}
}

// arrival is a live query's event: the put's text, and when it was read.
type arrival struct {
	text string
	at   time.Time
}

// openSubs opens n live queries (on room 0, or on rooms base+i when
// !same) and waits, at most c.limit, for each one's first rows.
func (c *changesConfig) openSubs(ctx context.Context, s *server, n int, same bool, base int, events chan<- arrival) error {
	client := sseClient(n)
	errs := make(chan error, n)
	for i := range n {
		room := 0
		if !same {
			room = base + i
		}
		var once sync.Once
		go subscribe(ctx, client, s.url, room, func(err error) { once.Do(func() { errs <- err }) }, events)
	}
	timeout := time.After(c.limit)
	for k := range n {
		select {
		case err := <-errs:
			if err != nil {
				return err
			}
		case <-timeout:
			return fmt.Errorf("%d of %d live queries open after %s", k, n, c.limit)
		}
	}
	return nil
}

func (c *changesConfig) idleMemory() (before, after int64, err error) {
	s, err := startServer(c.bin, "--file", c.dir+"/idle.db", "--max-conns", strconv.Itoa(c.idle+100))
	if err != nil {
		return 0, 0, err
	}
	defer s.stop()
	s.must(`create collection msgs (room int, text text)`)
	runtime.GC()
	time.Sleep(500 * time.Millisecond) // let the server's start-up garbage settle
	before = s.rss()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.openSubs(ctx, s, c.idle, false, 1, nil); err != nil {
		return 0, 0, err
	}
	time.Sleep(500 * time.Millisecond)
	return before, s.rss(), nil
}

// latency opens subs live queries on a fresh server and times c.writes
// puts, one at a time, to each matching subscriber's event.
func (c *changesConfig) latency(what string, subs int, same bool) (*latencyCell, error) {
	s, err := startServer(c.bin, "--file", fmt.Sprintf("%s/lat-%d-%v.db", c.dir, subs, same), "--max-conns", strconv.Itoa(subs+100))
	if err != nil {
		return nil, err
	}
	defer s.stop()
	s.must(`create collection msgs (room int, text text)`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan arrival, subs*4+1)
	if err := c.openSubs(ctx, s, subs, same, 0, events); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	cell := &latencyCell{what: what, subs: subs, match: subs}
	if !same {
		cell.match = min(subs, 1)
	}
	cpu0 := s.cpu()
	deadline := time.Now().Add(c.limit)
	n := 0
	for ; n < c.writes && time.Now().Before(deadline); n++ {
		text := strconv.Itoa(n + 1)
		start := time.Now()
		if _, err := s.query(`put msgs {room: 0, text: $1}`, []any{text}, 0); err != nil {
			return nil, err
		}
		cell.put = append(cell.put, time.Since(start))
		timeout := time.After(30 * time.Second)
		for k := 0; k < cell.match; k++ {
			select {
			case got := <-events:
				if got.text != text {
					return nil, fmt.Errorf("%s: the event of put %s during put %s", what, got.text, text)
				}
				cell.event = append(cell.event, got.at.Sub(start))
			case <-timeout:
				return nil, fmt.Errorf("%s: put %s: %d of %d events in 30 s", what, text, k, cell.match)
			}
		}
	}
	if n > 0 {
		cell.cpuPerWrite = (s.cpu() - cpu0) / time.Duration(n)
	}
	return cell, nil
}

// fenecStream writes c.stream rows, c.batch per put, then reads them all
// through one consumer, 1 000 per read, acknowledging each read; it
// returns rows written per second and read per second.
func (c *changesConfig) fenecStream() (written, read float64, err error) {
	s, err := startServer(c.bin, "--file", c.dir+"/stream.db", "--changes-retain", strconv.Itoa(c.stream+1000))
	if err != nil {
		return 0, 0, err
	}
	defer s.stop()
	s.must(`create collection msgs (room int, text text)`)
	docs := make([]map[string]any, c.batch)
	for i := range docs {
		docs[i] = map[string]any{"room": i % 10, "text": "message " + strconv.Itoa(i)}
	}
	deadline := time.Now().Add(c.limit)
	start := time.Now()
	n := 0
	for n < c.stream && time.Now().Before(deadline) {
		if _, err := s.query(`put msgs $1`, []any{docs}, 0); err != nil {
			return 0, 0, err
		}
		n += c.batch
	}
	written = float64(n) / time.Since(start).Seconds()
	start, deadline = time.Now(), time.Now().Add(c.limit)
	got := 0
	for got < n && time.Now().Before(deadline) {
		resp, err := s.http.Get(s.url + "/_changes?consumer=c&collection=msgs&limit=1000&wait=1000")
		if err != nil {
			return 0, 0, err
		}
		var page struct {
			Next    int64             `json:"next"`
			Changes []json.RawMessage `json:"changes"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			return 0, 0, fmt.Errorf("GET /_changes: %s %v", resp.Status, err)
		}
		got += len(page.Changes)
		if _, err := s.post("/_changes/ack", map[string]any{"consumer": "c", "position": page.Next}, 0); err != nil {
			return 0, 0, err
		}
	}
	if got < n {
		return 0, 0, fmt.Errorf("read %d of %d changes in %s", got, n, c.limit)
	}
	return written, float64(got) / time.Since(start).Seconds(), nil
}

// redisStream is fenecStream's work on a Redis stream: XADD in
// pipelines of c.batch, then XREADGROUP COUNT 1000 and XACK.
func (c *changesConfig) redisStream(rdb *redis.Client) (written, read float64, err error) {
	ctx := context.Background()
	if err := rdb.XGroupCreateMkStream(ctx, "msgs", "g", "0").Err(); err != nil {
		return 0, 0, err
	}
	deadline := time.Now().Add(c.limit)
	start := time.Now()
	n := 0
	for n < c.stream && time.Now().Before(deadline) {
		p := rdb.Pipeline()
		for i := range c.batch {
			p.XAdd(ctx, &redis.XAddArgs{Stream: "msgs", Values: []any{"room", strconv.Itoa(i % 10), "text", "message " + strconv.Itoa(i)}})
		}
		if _, err := p.Exec(ctx); err != nil {
			return 0, 0, err
		}
		n += c.batch
	}
	written = float64(n) / time.Since(start).Seconds()
	start, deadline = time.Now(), time.Now().Add(c.limit)
	got := 0
	for got < n && time.Now().Before(deadline) {
		streams, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "g", Consumer: "c", Streams: []string{"msgs", ">"}, Count: 1000, Block: time.Second}).Result()
		if err != nil {
			return 0, 0, err
		}
		var ids []string
		for _, m := range streams[0].Messages {
			ids = append(ids, m.ID)
		}
		got += len(ids)
		if err := rdb.XAck(ctx, "msgs", "g", ids...).Err(); err != nil {
			return 0, 0, err
		}
	}
	if got < n {
		return 0, 0, fmt.Errorf("read %d of %d messages in %s", got, n, c.limit)
	}
	return written, float64(got) / time.Since(start).Seconds(), nil
}
