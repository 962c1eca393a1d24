/**
 * `s` stored flat. V8 keeps a string built by concatenation (a template literal of a key, say)
 * as a tree of its parts, 32 bytes a node, until something reads it whole, and a read leaves the
 * tree's root in place; a key kept for as long as its object is served costs two to ten times its
 * characters that way. `normalize()` hands back one flat copy at about the cost of building the
 * key, and `s` itself when normalizing would change it (text that is not in NFC is kept as given:
 * a key must never denote another string).
 */
export function compactString(s: string): string {
  const flat = s.normalize();
  return flat === s ? flat : s;
}
