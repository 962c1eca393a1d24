import { MeshmuxError } from '../../core/errors.js';
import { typeUrlOf, type KindDescriptor } from '../../schema/kinds.js';
import { findKind } from '../streaming/kind-selection.js';
import type { SubscriptionChannel } from '../streaming/subscription-state.js';

/**
 * Which spelling of a kind's type URL to ask an upstream for:
 * - `current`: the version istiod ≥1.24 serves (`networking.istio.io/v1/...`);
 * - `legacy`: the version istiod 1.9–1.23 serves (`networking.istio.io/v1alpha3/...`);
 * - `auto`: both, served from whichever holds objects (see {@link planTypeUrls});
 * - or one explicit version of the kind, e.g. `v1alpha3` for Nacos's ServiceEntry.
 */
export type ApiVersionChoice = string;

/** One choice for every kind, or choices per kind name with an optional `default`. */
export type ApiVersions = ApiVersionChoice | Readonly<Record<string, ApiVersionChoice>>;

/** The default: works against istiod of any release, Nacos, Higress and another meshmux. */
export const DEFAULT_API_VERSIONS: ApiVersionChoice = 'auto';

function choiceFor(kind: KindDescriptor, apiVersions: ApiVersions): ApiVersionChoice {
  if (typeof apiVersions === 'string') return apiVersions;
  for (const [name, choice] of Object.entries(apiVersions)) {
    if (name !== 'default' && findKind(name) === kind) return choice;
  }
  return apiVersions['default'] ?? DEFAULT_API_VERSIONS;
}

/** The versions a choice asks for, preferred first. */
function versionsFor(kind: KindDescriptor, choice: ApiVersionChoice, source: string): string[] {
  switch (choice) {
    case 'current':
      return [kind.currentVersion];
    case 'legacy':
      return [kind.legacyVersion];
    case 'auto':
      return [...new Set([kind.currentVersion, kind.legacyVersion])];
    default:
      if (!kind.versions.includes(choice)) {
        throw new MeshmuxError(
          'CONFIG',
          `${kind.kind} has no version "${choice}" (known: ${kind.versions.join(', ')})`,
          { file: source, field: 'apiVersions' },
        );
      }
      return [choice];
  }
}

/**
 * The type URLs to subscribe, one channel each, preferred spelling of a kind first.
 *
 * `auto` subscribes both the current and the legacy spelling of every kind that has two, and
 * serves the kind from the one that holds objects (preferring the one it served last, then the
 * current one). An upstream answers the spelling it does not serve with an empty list (istiod
 * ≥1.24 for v1alpha3, istiod ≤1.23 for v1, Nacos for v1), and an empty list must never delete
 * what the other spelling holds: a kind is emptied only when every spelling is empty, and a
 * stream is served only once every spelling answered on it. The cost is a second subscription
 * per kind; the gain is that no probe or guess can go stale when the upstream is upgraded.
 */
export function planTypeUrls(
  kinds: readonly KindDescriptor[],
  apiVersions: ApiVersions,
  source: string,
): SubscriptionChannel[] {
  const channels: SubscriptionChannel[] = [];
  for (const kind of kinds) {
    for (const version of versionsFor(kind, choiceFor(kind, apiVersions), source)) {
      channels.push({ id: typeUrlOf(kind, version), kind });
    }
  }
  return channels;
}
