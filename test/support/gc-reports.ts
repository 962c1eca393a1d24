import { PerformanceObserver } from 'node:perf_hooks';

/**
 * Resolves with the kind of the next collection node reports of one of `kinds`; fails after 10 s
 * (node reports collections to observers without keeping the process alive: the timer does).
 */
export function nextCollection(kinds: readonly number[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      observer.disconnect();
      reject(new Error(`no collection of kind ${kinds.join(' or ')} reported in 10 s`));
    }, 10_000);
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        const kind = (entry as { readonly detail?: { readonly kind?: number } }).detail?.kind;
        if (kind === undefined || !kinds.includes(kind)) continue;
        observer.disconnect();
        clearTimeout(timer);
        resolve(kind);
        return;
      }
    });
    observer.observe({ entryTypes: ['gc'] });
  });
}
