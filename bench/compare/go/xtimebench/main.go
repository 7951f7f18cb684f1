// xtimebench: golang.org/x/time/rate (Debian's golang-golang-x-time-dev) on the work bench/compare/inproc.cc gives
// ratekeeper, so that the two can be put side by side.
//
//	xtimebench bench   prints "name threads ns_per_decision allowed_fraction" lines:
//	                   one limiter (hot) and a map of 1,000,000 limiters behind a sync.Mutex (the usual keyed use),
//	                   1 and 2 goroutines (GOMAXPROCS 2), AllowN(now, 1) with a simulated now (10 µs a decision per
//	                   goroutine, as in rk_bench), so that no clock read is timed on either side.
//	xtimebench memory  prints "bytes_per_key N": runtime.MemStats.HeapAlloc around creating 1,000,000 limiters in
//	                   a map[string]*rate.Limiter keyed by 16-byte strings.
//	xtimebench replay RATE BURST
//	                   reads "<time-seconds> <key> [cost]" lines and prints one "0|1" line per attempt:
//	                   AllowN(t, cost) on one limiter per key; the times are those of the trace.
//
// Built offline with GOPATH=/usr/share/gocode GO111MODULE=off (bench/compare does it).
package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/time/rate"
)

const (
	numKeys = 1000000
	stepNs  = 10000 // simulated time per decision per goroutine, as rk_bench
	limit   = 1e6   // tokens per second: 10x the offered rate of one goroutine
	burst   = 1000000
)

var base = time.Unix(1000, 0)

// cursor: where the previous run's simulated time ended, so that every run moves time forward.
var cursor = base

func keys() []string {
	k := make([]string, numKeys)
	for i := range k {
		k[i] = fmt.Sprintf("user:%011d", i)
	}
	return k
}

type keyed struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

// get is the usual per-key pattern: look up under a lock, create on first sight.
func (k *keyed) get(key string) *rate.Limiter {
	k.mu.Lock()
	l, ok := k.m[key]
	if !ok {
		l = rate.NewLimiter(limit, burst)
		k.m[key] = l
	}
	k.mu.Unlock()
	return l
}

// latest: the latest simulated time (ns since base) any goroutine has reached. As in rk_bench, each goroutine
// catches up with it (or raises it) every 256 decisions, so that the two clocks of a 2-goroutine run stay close
// even when the scheduler runs one goroutine long before the other.
var latest atomic.Int64

func resync(now time.Time) time.Time {
	mine := now.Sub(base).Nanoseconds()
	for {
		l := latest.Load()
		if l > mine {
			return base.Add(time.Duration(l))
		}
		if latest.CompareAndSwap(l, mine) {
			return now
		}
	}
}

// pin locks the calling goroutine to its OS thread and that thread to CPU `cpu` (as rk_bench and
// rk_compare_inproc pin theirs): unpinned, both threads of a 2-thread run sometimes share one vCPU.
func pin(cpu int) {
	runtime.LockOSThread()
	var mask [16]uint64
	mask[cpu/64] |= 1 << (cpu % 64)
	syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask)))
}

func unpin() {
	var mask [16]uint64
	for i := 0; i < runtime.NumCPU(); i++ {
		mask[i/64] |= 1 << (i % 64)
	}
	syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask)))
	runtime.UnlockOSThread()
}

// run times n decisions per goroutine with `threads` goroutines; decide(g, i, now) makes one.
func run(threads, n int, decide func(g, i int, now time.Time) bool) (nsPer float64, allowed float64) {
	var wg sync.WaitGroup
	counts := make([]int, threads)
	start := time.Now()
	for g := 0; g < threads; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			pin(g % runtime.NumCPU())
			defer unpin()
			ok := 0
			now := cursor.Add(time.Duration(g) * time.Microsecond) // the goroutines' clocks nearly in step
			for i := 0; i < n; i++ {
				now = now.Add(stepNs)
				if i&255 == 255 {
					now = resync(now)
				}
				if decide(g, i, now) {
					ok++
				}
			}
			counts[g] = ok
		}(g)
	}
	wg.Wait()
	el := time.Since(start)
	cursor = base.Add(time.Duration(latest.Load()) + 10*time.Millisecond)
	total := 0
	for _, c := range counts {
		total += c
	}
	return float64(el.Nanoseconds()) / float64(threads*n), float64(total) / float64(threads*n)
}

func bench() {
	runtime.GOMAXPROCS(2)
	ks := keys()
	n := 4000000
	for _, threads := range []int{1, 2} {
		hot := rate.NewLimiter(limit, burst)
		// Simulated clocks of the two goroutines differ by a few ms at most; AllowN handles a time behind the
		// last one (it never gives tokens back).
		run(threads, n/4, func(g, i int, now time.Time) bool { return hot.AllowN(now, 1) }) // warm up
		ns, ok := run(threads, n, func(g, i int, now time.Time) bool { return hot.AllowN(now, 1) })
		fmt.Printf("hot %d %.1f %.4f\n", threads, ns, ok)
	}
	for _, threads := range []int{1, 2} {
		k := &keyed{m: make(map[string]*rate.Limiter, numKeys)}
		for _, key := range ks {
			k.get(key).AllowN(cursor, 1)
		}
		half := numKeys / threads
		ns, ok := run(threads, n, func(g, i int, now time.Time) bool {
			return k.get(ks[g*half+i%half]).AllowN(now, 1)
		})
		fmt.Printf("1M %d %.1f %.4f\n", threads, ns, ok)
		k = nil
		runtime.GC()
	}
}

func memory() {
	ks := keys()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	m := make(map[string]*rate.Limiter)
	for _, key := range ks {
		l := rate.NewLimiter(limit, burst)
		l.AllowN(base, 1)
		m[key] = l
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	fmt.Printf("bytes_per_key %.1f\n", float64(after.HeapAlloc-before.HeapAlloc)/numKeys)
	runtime.KeepAlive(m)
	runtime.KeepAlive(ks)
}

func replay(r float64, b int) {
	lims := map[string]*rate.Limiter{}
	in := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		sec, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad time:", f[0])
			os.Exit(2)
		}
		cost := 1
		if len(f) > 2 {
			cost, _ = strconv.Atoi(f[2])
		}
		l, ok := lims[f[1]]
		if !ok {
			l = rate.NewLimiter(rate.Limit(r), b)
			lims[f[1]] = l
		}
		// Nanoseconds from the trace's text, as ratekeeper reads them.
		t := time.Unix(0, 0).Add(time.Duration(sec*1e9 + 0.5))
		if l.AllowN(t, cost) {
			fmt.Fprintln(out, 1)
		} else {
			fmt.Fprintln(out, 0)
		}
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: xtimebench bench | memory | replay RATE BURST")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "bench":
		bench()
	case "memory":
		memory()
	case "replay":
		r, _ := strconv.ParseFloat(os.Args[2], 64)
		b, _ := strconv.Atoi(os.Args[3])
		replay(r, b)
	default:
		os.Exit(2)
	}
}
