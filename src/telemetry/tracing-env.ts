import { LogLineBudget } from '../core/log-line-budget.js';
import type { Logger } from '../core/logger.js';
import { MESHMUX_VERSION } from '../core/version.js';
import type { ChangeTracing } from './tracing.js';

/** The environment variables tracing reads (`process.env` in production). */
export type TracingEnv = Readonly<Record<string, string | undefined>>;

/**
 * Whether meshmux exports traces: only when an OTLP endpoint is configured
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT`), and not with
 * `OTEL_SDK_DISABLED=true` or an `OTEL_TRACES_EXPORTER` that does not name `otlp`. Everything else
 * is the OpenTelemetry SDK's to read (see {@link tracingFromEnv}).
 */
export function tracingEnabled(env: TracingEnv, log?: Logger): boolean {
  if (env['OTEL_SDK_DISABLED']?.trim().toLowerCase() === 'true') return false;
  const exporters = env['OTEL_TRACES_EXPORTER']?.split(',').map((s) => s.trim().toLowerCase());
  if (exporters !== undefined && exporters.some((e) => e !== '') && !exporters.includes('otlp')) {
    if (!exporters.includes('none')) {
      log?.warn(
        { exporters },
        'OTEL_TRACES_EXPORTER names no exporter meshmux has (only otlp): tracing is off',
      );
    }
    return false;
  }
  const endpoint = (name: string): boolean => (env[name]?.trim() ?? '') !== '';
  if (!endpoint('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') && !endpoint('OTEL_EXPORTER_OTLP_ENDPOINT'))
    return false;
  const protocol = env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] ?? env['OTEL_EXPORTER_OTLP_PROTOCOL'];
  if (protocol !== undefined && protocol.trim() !== 'http/json') {
    log?.warn(
      { protocol },
      'meshmux exports traces as OTLP/HTTP JSON only; the configured protocol is ignored',
    );
  }
  return true;
}

/** Lines of the OpenTelemetry SDK logged at most per window; the rest counted. */
const DIAG_LINES = 20;
const DIAG_WINDOW_MS = 10_000;

/**
 * Tracing as the environment configures it, or undefined when it is off ({@link tracingEnabled},
 * decided on `env`). The OpenTelemetry SDK reads the rest of the standard variables from the
 * process environment itself: the endpoint, headers, timeout and compression
 * (`OTEL_EXPORTER_OTLP_*`), the sampler (`OTEL_TRACES_SAMPLER`, `OTEL_TRACES_SAMPLER_ARG`), batching
 * (`OTEL_BSP_*`) and the resource (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, over meshmux's
 * own service name and version). The provider is private to this meshmux (never registered
 * globally), so several instances can share a process.
 */
export async function tracingFromEnv(env: TracingEnv, log: Logger): Promise<ChangeTracing | undefined> {
  if (!tracingEnabled(env, log)) return undefined;
  // Loaded only when tracing is on: the SDK, its exporter and OpenTelemetry's core (with
  // ChangeTracing) are about 0.15 s of a start. The API loads anyway: prom-client requires it.
  const [
    { ChangeTracing },
    { diag, DiagLogLevel },
    { OTLPTraceExporter },
    resources,
    { BasicTracerProvider, BatchSpanProcessor },
    conventions,
  ] = await Promise.all([
    import('./tracing.js'),
    import('@opentelemetry/api'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/resources'),
    import('@opentelemetry/sdk-trace-base'),
    import('@opentelemetry/semantic-conventions'),
  ]);
  const { detectResources, envDetector, resourceFromAttributes } = resources;
  const { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } = conventions;
  // The SDK says something per failed export and per dropped batch: bounded like any line a
  // peer can cause (a collector that fails, a flood of spans).
  const lines = new LogLineBudget(Date.now, DIAG_LINES, DIAG_WINDOW_MS, {
    schedule: (work, delayMs) => setTimeout(work, delayMs).unref(),
    log: (leftOut) => log.warn({ notLogged: leftOut }, 'OpenTelemetry lines not logged'),
  });
  const warn = (message: string, args: unknown[]): void => {
    const { log: logIt, leftOut } = lines.allow();
    if (logIt) log.warn({ args, notLogged: leftOut }, `OpenTelemetry: ${message}`);
  };
  diag.setLogger(
    {
      error: (message, ...args) => warn(message, args),
      warn: (message, ...args) => warn(message, args),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  const resource = resourceFromAttributes({
    [ATTR_SERVICE_NAME]: 'meshmux',
    [ATTR_SERVICE_VERSION]: MESHMUX_VERSION,
  }).merge(detectResources({ detectors: [envDetector] }));
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  log.info(
    { endpoint: env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] ?? env['OTEL_EXPORTER_OTLP_ENDPOINT'] },
    'tracing upstream changes over OTLP/HTTP',
  );
  return new ChangeTracing(provider.getTracer('meshmux', MESHMUX_VERSION), () => provider.shutdown());
}
