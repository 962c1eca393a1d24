import type { IntervalHistogram } from 'node:perf_hooks';

/** What the process has spent: CPU and event-loop delay in milliseconds, memory in bytes. */
export interface ProcessCounters {
  readonly cpuUserMs: number;
  readonly cpuSystemMs: number;
  readonly rssBytes: number;
  readonly maxRssBytes: number;
  readonly heapUsedBytes: number;
  readonly externalBytes: number;
  readonly eventLoopDelayP50Ms: number;
  readonly eventLoopDelayP99Ms: number;
  readonly eventLoopDelayMaxMs: number;
}

/** Reads the process's counters now; `loopDelay` is a running `monitorEventLoopDelay` histogram. */
export function processCounters(loopDelay: IntervalHistogram): ProcessCounters {
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  const ms = (ns: number): number => Math.round(ns / 1e3) / 1e3;
  return {
    cpuUserMs: cpu.user / 1000,
    cpuSystemMs: cpu.system / 1000,
    rssBytes: memory.rss,
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
    heapUsedBytes: memory.heapUsed,
    externalBytes: memory.external,
    eventLoopDelayP50Ms: ms(loopDelay.percentile(50)),
    eventLoopDelayP99Ms: ms(loopDelay.percentile(99)),
    eventLoopDelayMaxMs: ms(loopDelay.max),
  };
}
