import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { expressionTest, globMatcher, globProblem, type GlobSubject } from '../../src/core/glob.js';

function matches(glob: string, value: string, subject: GlobSubject = 'name'): boolean {
  return globMatcher([glob], subject)(value);
}

describe('the one glob dialect', () => {
  test('a glob without special characters matches exactly that value, case-sensitively', () => {
    assert.equal(matches('team-a', 'team-a'), true);
    assert.equal(matches('team-a', 'team-ab'), false);
    assert.equal(matches('VirtualService', 'virtualservice'), false);
    assert.equal(matches('team-*', 'TEAM-a'), false);
  });

  test('* matches any run of characters, also none', () => {
    assert.equal(matches('team-*', 'team-'), true);
    assert.equal(matches('team-*', 'team-a-prod'), true);
    assert.equal(matches('*-prod', 'team-a-prod'), true);
    assert.equal(matches('team-*', 'other'), false);
  });

  test('? matches exactly one character', () => {
    assert.equal(matches('ns-?', 'ns-1'), true);
    assert.equal(matches('ns-?', 'ns-12'), false);
    assert.equal(matches('ns-?', 'ns-'), false);
  });

  test('[abc] and [a-z] match one character of the set; [^abc] and [!abc] one outside it', () => {
    assert.equal(matches('ns-[abc]', 'ns-b'), true);
    assert.equal(matches('ns-[abc]', 'ns-d'), false);
    assert.equal(matches('ns-[0-9]', 'ns-7'), true);
    assert.equal(matches('ns-[^abc]', 'ns-d'), true);
    assert.equal(matches('ns-[^abc]', 'ns-a'), false);
    assert.equal(matches('ns-[!abc]', 'ns-d'), true);
    assert.equal(matches('ns-[!abc]', 'ns-a'), false);
  });

  test('{a,b} matches either alternative', () => {
    assert.equal(matches('{team,ops}-*', 'ops-1'), true);
    assert.equal(matches('{team,ops}-*', 'dev-1'), false);
    assert.equal(matches('*.{yaml,yml}', 'a.yml', 'path'), true);
  });

  test('( ) | + @ ! and . stand for themselves; \\ makes a special character literal', () => {
    assert.equal(matches('a(b)|c+d@e!', 'a(b)|c+d@e!'), true);
    assert.equal(matches('!x', 'y'), false);
    assert.equal(matches('a.b', 'axb'), false);
    assert.equal(matches('a\\*', 'a*'), true);
    assert.equal(matches('a\\*', 'ab'), false);
    assert.equal(matches('*|a', 'a'), false, '| after a * is no alternative either');
    assert.equal(matches('*|a', 'x|a'), true);
  });

  test('in a name, * and ? cross . and / (a SAN glob covers every service account of a namespace)', () => {
    assert.equal(matches('spiffe://cluster.local/ns/x/*', 'spiffe://cluster.local/ns/x/sa/default'), true);
    assert.equal(matches('spiffe://cluster.local/ns/x/*', 'spiffe://cluster.local/ns/y/sa/default'), false);
    assert.equal(matches('com.example.*', 'com.example.api.Greeter'), true);
    assert.equal(matches('networking*', 'networking.istio.io/VirtualService'), true);
    assert.equal(matches('a?b', 'a/b'), true);
    assert.equal(matches('*', '.hidden'), true);
    assert.equal(matches('*/a', 'xa'), false, 'a / after a * is no less a character');
    // picomatch's own shortcut for these whole globs wants a character after the dot.
    for (const [glob, value] of [
      ['*.*', 'a.'],
      ['*.*.a', 'b..a'],
    ] as const) {
      assert.equal(matches(glob, value), true, `${glob} on ${value}`);
      assert.equal(expressionTest(glob, 'name')(value), true, `${glob} on ${value}, as an expression`);
    }
  });

  test('in a path, / separates folders: * stays in one folder and a whole ** folder spans any number', () => {
    assert.equal(matches('istio/*.yaml', 'istio/vs.yaml', 'path'), true);
    assert.equal(matches('istio/*.yaml', 'istio/team/vs.yaml', 'path'), false);
    assert.equal(matches('istio/**/*.yaml', 'istio/team/a/vs.yaml', 'path'), true);
    assert.equal(matches('istio/**/*.yaml', 'istio/vs.yaml', 'path'), true);
    assert.equal(matches('a?b', 'a/b', 'path'), false);
  });

  test('in a path, a file or folder starting with . matches only where the glob spells the dot', () => {
    assert.equal(matches('**/*.yaml', '.github/ci.yaml', 'path'), false);
    assert.equal(matches('**/*.yaml', 'istio/.hidden.yaml', 'path'), false);
    assert.equal(matches('.github/*.yaml', '.github/ci.yaml', 'path'), true);
  });

  test('a list matches when any of its globs does; an empty or absent list matches nothing', () => {
    const m = globMatcher(['default', 'team-*']);
    assert.equal(m('default'), true);
    assert.equal(m('team-x'), true);
    assert.equal(m('other'), false);
    assert.equal(globMatcher([])('anything'), false);
    assert.equal(globMatcher(undefined)('anything'), false);
  });

  test('an unclosed bracket or brace, or a backwards range, is named as invalid and does not compile', () => {
    for (const bad of ['ns-[ab', 'ns-{a,b', '[z-a]']) {
      assert.match(globProblem(bad) ?? '', /not a valid glob/, bad);
      assert.match(globProblem(bad, 'path') ?? '', /not a valid glob/, bad);
      assert.throws(() => globMatcher([bad]), SyntaxError, bad);
    }
    assert.equal(globProblem('team-*'), undefined);
    assert.equal(globProblem('a(b'), undefined);
    assert.equal(globProblem('**/*.{yaml,yml}', 'path'), undefined);
  });

  test('a name glob of *, ? and characters matches exactly as the expression picomatch builds for it', () => {
    // Globs and values over characters that mean something to a glob, an expression or a path;
    // not `|` nor `/` in globs, which picomatch's expression reads as an alternative and drops
    // after a `*` (see above).
    const part = fc.constantFrom(
      'a',
      'b',
      '-',
      '~',
      '.',
      '*',
      '?',
      '\\*',
      '\\?',
      '(',
      ')',
      '+',
      '!',
      '@',
      '$',
      '^',
    );
    const glob = fc
      .array(part, { minLength: 1, maxLength: 7 })
      .map((parts) => parts.join(''))
      .filter((g) => /[*?\\]/.test(g) && globProblem(g) === undefined);
    const value = fc
      .array(fc.constantFrom('a', 'b', '-', '~', '.', '/', '*', '?', '(', '|', '\\'), { maxLength: 8 })
      .map((chars) => chars.join(''));
    fc.assert(
      fc.property(glob, value, (g, v) => globMatcher([g])(v) === expressionTest(g, 'name')(v)),
      { numRuns: 20_000 },
    );
  });

  test('a glob with several * refuses a long value a client chose in one pass over it', () => {
    const nodeId = globMatcher(['*~*~*.istio-system~istio-system.svc.cluster.local']);
    assert.equal(nodeId('sidecar~10.0.0.1~istiod-1.istio-system~istio-system.svc.cluster.local'), true);
    assert.equal(nodeId('~'.repeat(1_020)), false);
    const cluster = globMatcher(['*-*-east']);
    assert.equal(cluster('eu-west-east'), true);
    assert.equal(cluster('-'.repeat(60_000)), false);
    assert.equal(cluster(`${'-'.repeat(60_000)}east`), true);
  });
});
