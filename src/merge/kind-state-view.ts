import { MeshmuxError } from '../core/errors.js';
import type { ConfigResource } from '../core/resource.js';

/**
 * Whether the state a view reads is still the one it was handed out for. The owner of the state
 * revokes the token before it alters the state in place, and hands out new views with a new token.
 */
export interface ViewToken {
  readonly valid: boolean;
}

/**
 * A read-only window on a state its owner may later alter in place, for readers that read it at
 * once. Reads while the token is valid see the state; a read after the owner altered it throws
 * (an INTERNAL error), so a reader that keeps the view too long fails loudly instead of reading a
 * mix of two states. Costs one check per call, never a copy.
 */
export class KindStateView implements ReadonlyMap<string, ConfigResource> {
  constructor(
    private readonly state: ReadonlyMap<string, ConfigResource>,
    private readonly token: ViewToken,
  ) {}

  get size(): number {
    return this.live().size;
  }

  get(key: string): ConfigResource | undefined {
    return this.live().get(key);
  }

  has(key: string): boolean {
    return this.live().has(key);
  }

  forEach(
    callback: (value: ConfigResource, key: string, map: ReadonlyMap<string, ConfigResource>) => void,
    thisArg?: unknown,
  ): void {
    // The map's own forEach: an iterator would allocate a step and an entry per object.
    this.live().forEach((value, key) => callback.call(thisArg, value, key, this));
  }

  entries(): MapIterator<[string, ConfigResource]> {
    return this.live().entries();
  }

  keys(): MapIterator<string> {
    return this.live().keys();
  }

  values(): MapIterator<ConfigResource> {
    return this.live().values();
  }

  [Symbol.iterator](): MapIterator<[string, ConfigResource]> {
    return this.live().entries();
  }

  private live(): ReadonlyMap<string, ConfigResource> {
    if (!this.token.valid) {
      throw new MeshmuxError(
        'INTERNAL',
        "a source's kind state was read after the source changed it: read a change before the next one",
      );
    }
    return this.state;
  }
}
