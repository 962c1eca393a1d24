import { Gauge, type Registry } from 'prom-client';
import type { MeshmuxError } from '../core/errors.js';

/** The last configuration reload that failed, as the status page shows it. A fresh object. */
export interface ReloadFailure {
  /** The problems, one line each with the file, line and field where known (`MeshmuxError.describe()`). */
  readonly errors: readonly string[];
  readonly at: Date;
  /** When the configuration that is still running was applied. */
  readonly runningSince: Date;
}

/**
 * The outcome of configuration reloads, the way Prometheus and Alertmanager report theirs: the
 * configuration read at start counts as a successful load; a failed reload leaves the running
 * configuration in place and is shown until a later one succeeds. Exposes
 * `meshmux_config_last_reload_successful` (1 or 0),
 * `meshmux_config_last_reload_success_timestamp_seconds` and
 * `meshmux_config_last_reload_timestamp_seconds` (the last attempt, successful or not).
 */
export class ConfigReloads {
  private lastAttempt: Date;
  private lastSuccess: Date;
  private lastErrors: readonly MeshmuxError[] | undefined;
  private restartOnly: readonly string[] = [];

  /** `loadedAt`: when the configuration the process started with was read. */
  constructor(loadedAt: Date) {
    this.lastAttempt = loadedAt;
    this.lastSuccess = loadedAt;
  }

  /**
   * A new configuration was applied; `restartOnly` names the settings it changes that apply only
   * on restart (empty when none), which keep their running values until then.
   */
  succeeded(at: Date, restartOnly: readonly string[] = []): void {
    this.lastAttempt = at;
    this.lastSuccess = at;
    this.lastErrors = undefined;
    this.restartOnly = [...restartOnly];
  }

  /** A new configuration was refused for these problems (at least one); the running one stays. */
  failed(problems: readonly MeshmuxError[], at: Date): void {
    this.lastAttempt = at;
    this.lastErrors = [...problems];
  }

  /** When the running configuration was loaded (at start or by the last successful reload). */
  get loadedAt(): Date {
    return this.lastSuccess;
  }

  /** Whether the last attempt succeeded. */
  get successful(): boolean {
    return this.lastErrors === undefined;
  }

  /**
   * The settings the applied configuration changes that wait for a restart (empty when none): a
   * refused reload leaves them as they were, since the configuration in force did not change.
   */
  get pendingRestart(): readonly string[] {
    return this.restartOnly;
  }

  /** The last failure, while no later reload has succeeded. */
  failure(): ReloadFailure | undefined {
    if (this.lastErrors === undefined) return undefined;
    return {
      errors: this.lastErrors.map((e) => e.describe()),
      at: this.lastAttempt,
      runningSince: this.lastSuccess,
    };
  }

  /** Adds the three gauges to `registry`; they are read at scrape time. */
  register(registry: Registry): void {
    const gauge = (name: string, help: string, value: () => number): void => {
      const g: Gauge = new Gauge({ name, help, registers: [registry], collect: () => g.set(value()) });
    };
    gauge(
      'meshmux_config_last_reload_successful',
      'Whether the last configuration reload succeeded (1) or was refused, keeping the running configuration (0).',
      () => (this.successful ? 1 : 0),
    );
    gauge(
      'meshmux_config_last_reload_success_timestamp_seconds',
      'When the running configuration was loaded (at start or by the last successful reload), Unix seconds.',
      () => this.lastSuccess.getTime() / 1000,
    );
    gauge(
      'meshmux_config_last_reload_timestamp_seconds',
      'When a configuration was last loaded or a reload last attempted, successful or not, Unix seconds.',
      () => this.lastAttempt.getTime() / 1000,
    );
  }
}
