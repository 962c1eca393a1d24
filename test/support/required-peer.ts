/**
 * What a test does when a real peer it needs (a program from a Debian package) is missing: in CI
 * (`CI` set and not `false`) it fails, with one line naming the package; elsewhere it skips and
 * says why. Tests never install packages themselves: .ci/run installs them up front.
 */
import type { TestContext } from 'node:test';

/** Whether the tests run in CI, where a missing peer is a failure. */
export function inCi(): boolean {
  const ci = process.env['CI'];
  return ci !== undefined && ci !== '' && ci !== 'false' && ci !== '0';
}

/** The one line that names what is missing and the Debian package that provides it. */
export function missingPeerLine(what: string, debianPackage: string): string {
  return `${what} is missing: install the Debian package ${debianPackage} (apt-get install -y ${debianPackage})`;
}

/**
 * Inside a test: nothing when `missing` is undefined; otherwise throws the line in CI, or skips
 * the test with it. Returns true when the test must stop here.
 */
export function failOrSkipWithout(t: TestContext, missing: string | undefined): boolean {
  if (missing === undefined) return false;
  if (inCi()) throw new Error(missing);
  t.skip(`${missing}; skipped because CI is not set`);
  return true;
}

/**
 * For `describe(name, { skip: suiteSkip(missing) }, …)`: false when the peer is there or in CI
 * (the suite runs, and its setup fails with the line), the reason to skip otherwise.
 */
export function suiteSkip(missing: string | undefined): string | false {
  if (missing === undefined || inCi()) return false;
  return `${missing}; skipped because CI is not set`;
}
