//go:build cgo

package main

/*
#include <stddef.h>
#include <stdint.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
// pm_bw_read_avx2 reads n bytes at p (n a multiple of 256) with 256-bit
// loads into four independent accumulators, so the loads, not a
// dependency chain, bound it; the result keeps the compiler from dropping
// them.
static __attribute__((target("avx2"))) uint64_t pm_bw_read_avx2(const char *p, size_t n)
{
	__m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
	for (size_t o = 0; o < n; o += 256) {
		a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *)(p + o)));
		b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i *)(p + o + 32)));
		c = _mm256_xor_si256(c, _mm256_load_si256((const __m256i *)(p + o + 64)));
		d = _mm256_xor_si256(d, _mm256_load_si256((const __m256i *)(p + o + 96)));
		a = _mm256_xor_si256(a, _mm256_load_si256((const __m256i *)(p + o + 128)));
		b = _mm256_xor_si256(b, _mm256_load_si256((const __m256i *)(p + o + 160)));
		c = _mm256_xor_si256(c, _mm256_load_si256((const __m256i *)(p + o + 192)));
		d = _mm256_xor_si256(d, _mm256_load_si256((const __m256i *)(p + o + 224)));
	}
	a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
	return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
static int pm_bw_has_avx2(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}
#else
static uint64_t pm_bw_read_avx2(const char *p, size_t n) { (void)p; (void)n; return 0; }
static int pm_bw_has_avx2(void) { return 0; }
#endif
// pm_bw_read reads n bytes at p (n a multiple of 256, p 32-byte aligned).
static uint64_t pm_bw_read(const char *p, size_t n)
{
	if (pm_bw_has_avx2())
		return pm_bw_read_avx2(p, n);
	uint64_t a = 0;
	for (size_t o = 0; o < n; o += 8)
		a ^= *(const uint64_t *)(p + o);
	return a;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// bwBytes is the probe's buffer: 512 MiB, 16 times the 32 MiB L3 of the
// machines this runs on, so every pass reads DRAM.
const bwBytes = 512 << 20

// bandwidth measures the read bandwidth of threads threads (bytes/s): each
// reads its share of a bwBytes buffer with 256-bit loads, all at once,
// passes times after one untimed pass that faults the pages in, in 2 MiB
// pages (huge) or 4 KiB ones; the best pass counts (the rate a streaming kernel can reach when nothing else
// competes; on a shared machine the others only lower it).
func bandwidth(threads, passes int, huge bool) (float64, error) {
	if threads < 1 || passes < 1 {
		return 0, fmt.Errorf("bandwidth: threads %d, passes %d", threads, passes)
	}
	buf, unmap, err := mapBuffer(bwBytes, huge)
	if err != nil {
		return 0, err
	}
	defer unmap()
	const off = 0
	share := bwBytes / threads / 256 * 256
	for i := range buf { // fault the pages in, with distinct bytes
		buf[i] = byte(i * 131)
	}
	var sink uint64
	var mu sync.Mutex
	pass := func() time.Duration {
		var wg sync.WaitGroup
		start := time.Now()
		for t := 0; t < threads; t++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				p := unsafe.Pointer(&buf[off+t*share])
				v := uint64(C.pm_bw_read((*C.char)(p), C.size_t(share)))
				mu.Lock()
				sink ^= v
				mu.Unlock()
			}()
		}
		wg.Wait()
		return time.Since(start)
	}
	pass()
	best := time.Duration(1 << 62)
	for i := 0; i < passes; i++ {
		best = min(best, pass())
	}
	_ = sink
	return float64(share*threads) / best.Seconds(), nil
}

// mapBuffer maps n bytes (a multiple of 2 MiB) starting at a 2 MiB
// boundary, in 2 MiB pages where the kernel gives them (huge: as the
// engine maps its repacked weights, native/panels.c, so the probe reads
// memory the way decode does, without a TLB miss per 4 KiB page) or in
// 4 KiB pages (as a file mapping is read), and the call that unmaps it.
func mapBuffer(n int, huge bool) ([]byte, func(), error) {
	const h = 2 << 20
	m, err := syscall.Mmap(-1, 0, n+h, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil, nil, fmt.Errorf("bandwidth: mmap of %d bytes: %v", n+h, err)
	}
	skip := (h - int(uintptr(unsafe.Pointer(&m[0]))%h)) % h
	buf := m[skip : skip+n]
	advice := syscall.MADV_NOHUGEPAGE
	if huge {
		advice = syscall.MADV_HUGEPAGE
	}
	_ = syscall.Madvise(buf, advice) // a hint: without it, the kernel's default pages
	return buf, func() { _ = syscall.Munmap(m) }, nil
}
