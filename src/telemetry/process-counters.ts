import { readFileSync } from 'node:fs';
import type { IntervalHistogram } from 'node:perf_hooks';
import { heapCollections } from '../core/heap-collections.js';
import { youngCollections } from '../core/young-collections.js';

/** What the process has spent: CPU and event-loop delay in milliseconds, memory in bytes. */
export interface ProcessCounters {
  readonly cpuUserMs: number;
  readonly cpuSystemMs: number;
  /**
   * Page faults served without I/O since the process started: memory touched for the first time,
   * most of them. Where a fault is dear (a virtual machine's), they are much of `cpuSystemMs`.
   */
  readonly minorPageFaults: number;
  readonly rssBytes: number;
  /** The most memory the process has had resident since it started ({@link peakRssBytes}). */
  readonly maxRssBytes: number;
  readonly heapUsedBytes: number;
  readonly externalBytes: number;
  readonly eventLoopDelayP50Ms: number;
  readonly eventLoopDelayP99Ms: number;
  readonly eventLoopDelayMaxMs: number;
  /** Full collections of the heap (markings of all of it) since the process started counting. */
  readonly fullCollections: number;
  /** Young-generation collections, V8's own and those run after network input. */
  readonly youngCollections: number;
  /** Of those, the ones run after network input (see `young-collections.ts`). */
  readonly youngCollectionsAfterInput: number;
  /** Young collections after network input left out because V8 was marking the old generation. */
  readonly youngCollectionsSkippedWhileMarking: number;
}

/**
 * Reads the process's counters now; `loopDelay` is a running `monitorEventLoopDelay` histogram.
 * The heap's collections are counted from the first read (or the first upstream stream) on.
 */
export function processCounters(loopDelay: IntervalHistogram): ProcessCounters {
  const collections = heapCollections();
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  const ms = (ns: number): number => Math.round(ns / 1e3) / 1e3;
  return {
    cpuUserMs: cpu.user / 1000,
    cpuSystemMs: cpu.system / 1000,
    minorPageFaults: process.resourceUsage().minorPageFault,
    rssBytes: memory.rss,
    maxRssBytes: peakRssBytes(),
    heapUsedBytes: memory.heapUsed,
    externalBytes: memory.external,
    eventLoopDelayP50Ms: ms(loopDelay.percentile(50)),
    eventLoopDelayP99Ms: ms(loopDelay.percentile(99)),
    eventLoopDelayMaxMs: ms(loopDelay.max),
    fullCollections: collections.full,
    youngCollections: collections.young,
    youngCollectionsAfterInput: youngCollections().runs,
    youngCollectionsSkippedWhileMarking: youngCollections().skipped,
  };
}

/**
 * The most memory this process has had resident since it started: on Linux its address space's
 * high-water mark (`VmHWM`), elsewhere what `getrusage` says.
 *
 * Why not `getrusage` everywhere: on Linux it reports, for a process started by fork and exec (as
 * node's `child_process` starts one), the larger of its own peak and the forking parent's peak up
 * to the fork, since the copy of the parent's address space carries its high-water mark across the
 * exec. A meshmux started by a large process would report that process's peak as its own.
 */
export function peakRssBytes(): number {
  try {
    const found = /^VmHWM:\s*(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'));
    if (found !== null) return Number(found[1]) * 1024;
  } catch {
    // No /proc: not Linux.
  }
  return process.resourceUsage().maxRSS * 1024;
}
