/**
 * The parts of RxJS meshmux uses, each from the module that defines it. The package's index loads
 * all of its 240 modules (every operator, the ajax and fetch helpers), about 70 ms of every start
 * of the server and of every CLI command, where these load a third of them. The paths are the
 * package's own exported `rxjs/internal/*` entry points: the same module instances as the index's,
 * so values mix freely with code that imports `rxjs` itself (the tests, RxJS's test scheduler).
 * Code under `src/` imports RxJS from here only (the lint configuration says so).
 */
export { BehaviorSubject } from 'rxjs/internal/BehaviorSubject';
export { firstValueFrom } from 'rxjs/internal/firstValueFrom';
export { Observable } from 'rxjs/internal/Observable';
export { of } from 'rxjs/internal/observable/of';
export { auditTime } from 'rxjs/internal/operators/auditTime';
export { catchError } from 'rxjs/internal/operators/catchError';
export { filter } from 'rxjs/internal/operators/filter';
export { take } from 'rxjs/internal/operators/take';
export { timeout } from 'rxjs/internal/operators/timeout';
export { asapScheduler } from 'rxjs/internal/scheduler/asap';
export { asyncScheduler } from 'rxjs/internal/scheduler/async';
export { Subject } from 'rxjs/internal/Subject';
export { Subscriber } from 'rxjs/internal/Subscriber';
export { Subscription } from 'rxjs/internal/Subscription';
export type { SchedulerLike } from 'rxjs/internal/types';
