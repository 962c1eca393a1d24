/**
 * The keys of `map` in code-unit order (the order `Array.prototype.sort` gives strings), in a new
 * array the caller may keep. Sorted in place by insertion: label and annotation maps have a few
 * keys, and the built-in sort allocates a work area on every call, which for the maps of every
 * object read, versioned and encoded was a fifth of all a start allocated.
 */
export function sortedKeys(map: Readonly<Record<string, unknown>>): string[] {
  const keys = Object.keys(map);
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i] as string;
    let j = i - 1;
    while (j >= 0 && (keys[j] as string) > key) {
      keys[j + 1] = keys[j] as string;
      j--;
    }
    keys[j + 1] = key;
  }
  return keys;
}
