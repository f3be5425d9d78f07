/**
 * RFC 9651 (Structured Field Values for HTTP) Lists and Dictionaries: members are Items or
 * Inner Lists with Parameters, and a bare Item is an Integer, a Decimal, a String, a Token, a
 * Byte Sequence (kept as its base64 text), a Boolean, a Date (`{ date }`, seconds) or a Display
 * String (`{ display }`).
 *
 * A field that does not parse gives `undefined`, as RFC 9651 §4.2 says a parser must treat
 * it: ignored as a whole, never half read.
 */
export type BareItem =
  | number
  | string
  | boolean
  | { readonly bytes: string }
  | { readonly date: number }
  | { readonly display: string };

export interface SfItem {
  /** An Inner List's value is its items. */
  readonly value: BareItem | readonly SfItem[];
  readonly params: ReadonlyMap<string, BareItem>;
}

class Cursor {
  i = 0;
  constructor(readonly s: string) {}
  get done(): boolean {
    return this.i >= this.s.length;
  }
  peek(): string {
    return this.s[this.i] ?? '';
  }
  skipSpaces(): void {
    while (this.peek() === ' ') this.i++;
  }
  skipOws(): void {
    while (this.peek() === ' ' || this.peek() === '\t') this.i++;
  }
}

const KEY_START = /[a-z*]/;
const KEY_CHAR = /[a-z0-9_\-.*]/;
const TOKEN_START = /[A-Za-z*]/;
const TOKEN_CHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z:/]/;

function parseKey(c: Cursor): string | undefined {
  if (!KEY_START.test(c.peek())) return undefined;
  const from = c.i;
  while (!c.done && KEY_CHAR.test(c.peek())) c.i++;
  return c.s.slice(from, c.i);
}

function parseNumber(c: Cursor): number | undefined {
  const m = /^-?\d{1,15}(\.\d{1,3})?/.exec(c.s.slice(c.i));
  if (!m) return undefined;
  const [text, fraction] = [m[0], m[1]];
  // RFC 9651 §4.2.4: at most 15 digits for an Integer, 12 before the point for a Decimal.
  if (fraction !== undefined && text.replace('-', '').indexOf('.') > 12) return undefined;
  c.i += text.length;
  return Number(text);
}

function parseString(c: Cursor): string | undefined {
  c.i++; // the opening quote
  let out = '';
  while (!c.done) {
    const ch = c.s[c.i++]!;
    if (ch === '\\') {
      const next = c.s[c.i++];
      if (next !== '"' && next !== '\\') return undefined;
      out += next;
    } else if (ch === '"') {
      return out;
    } else {
      const code = ch.charCodeAt(0);
      if (code < 0x20 || code > 0x7e) return undefined;
      out += ch;
    }
  }
  return undefined;
}

/**
 * A Display String after its `%"` (RFC 9651 §4.2.10): printable ASCII, and `%` with two
 * lower-case hex digits for each byte of UTF-8 beyond; no backslash escapes.
 */
function parseDisplayString(c: Cursor): string | undefined {
  const bytes: number[] = [];
  while (!c.done) {
    const ch = c.s[c.i++]!;
    const code = ch.charCodeAt(0);
    if (ch === '"') {
      try {
        return new TextDecoder('utf-8', { fatal: true }).decode(new Uint8Array(bytes));
      } catch {
        return undefined;
      }
    }
    if (ch === '%') {
      const hex = c.s.slice(c.i, c.i + 2);
      if (!/^[0-9a-f]{2}$/.test(hex)) return undefined;
      bytes.push(parseInt(hex, 16));
      c.i += 2;
    } else if (code >= 0x20 && code <= 0x7e) {
      bytes.push(code);
    } else {
      return undefined;
    }
  }
  return undefined;
}

function parseBareItem(c: Cursor): BareItem | undefined {
  const ch = c.peek();
  if (ch === '"') return parseString(c);
  if (ch === '-' || (ch >= '0' && ch <= '9')) return parseNumber(c);
  if (ch === ':') {
    const end = c.s.indexOf(':', c.i + 1);
    if (end < 0) return undefined;
    const bytes = c.s.slice(c.i + 1, end);
    if (!/^[A-Za-z0-9+/=]*$/.test(bytes)) return undefined;
    c.i = end + 1;
    return { bytes };
  }
  if (ch === '@') {
    c.i++;
    const date = parseNumber(c);
    return date !== undefined && Number.isInteger(date) ? { date } : undefined;
  }
  if (ch === '%' && c.s[c.i + 1] === '"') {
    c.i += 2;
    const display = parseDisplayString(c);
    return display === undefined ? undefined : { display };
  }
  if (ch === '?') {
    const b = c.s[c.i + 1];
    if (b !== '0' && b !== '1') return undefined;
    c.i += 2;
    return b === '1';
  }
  if (TOKEN_START.test(ch)) {
    const from = c.i;
    while (!c.done && TOKEN_CHAR.test(c.peek())) c.i++;
    return c.s.slice(from, c.i);
  }
  return undefined;
}

function parseParams(c: Cursor): Map<string, BareItem> | undefined {
  const params = new Map<string, BareItem>();
  while (c.peek() === ';') {
    c.i++;
    c.skipSpaces();
    const key = parseKey(c);
    if (key === undefined) return undefined;
    let value: BareItem | undefined = true;
    if (c.peek() === '=') {
      c.i++;
      value = parseBareItem(c);
      if (value === undefined) return undefined;
    }
    params.set(key, value);
  }
  return params;
}

function parseInnerList(c: Cursor): SfItem | undefined {
  c.i++; // the opening parenthesis
  const items: SfItem[] = [];
  for (;;) {
    c.skipSpaces();
    if (c.peek() === ')') {
      c.i++;
      const params = parseParams(c);
      return params && { value: items, params };
    }
    const item = parseItem(c, false);
    if (!item) return undefined;
    items.push(item);
    const next = c.peek();
    if (next !== ' ' && next !== ')') return undefined;
  }
}

function parseItem(c: Cursor, inner = true): SfItem | undefined {
  if (inner && c.peek() === '(') return parseInnerList(c);
  const value = parseBareItem(c);
  if (value === undefined) return undefined;
  const params = parseParams(c);
  return params && { value, params };
}

/** Runs `member` for each comma-separated member; false when the field is malformed. */
function members(field: string, member: (c: Cursor) => boolean): boolean {
  const c = new Cursor(field);
  c.skipSpaces();
  if (c.done) return true;
  for (;;) {
    if (!member(c)) return false;
    c.skipOws();
    if (c.done) return true;
    if (c.peek() !== ',') return false;
    c.i++;
    c.skipOws();
    if (c.done) return false;
  }
}

/** An RFC 9651 List (Items and Inner Lists), or `undefined` when the field does not parse as one. */
export function parseList(field: string): SfItem[] | undefined {
  const out: SfItem[] = [];
  const ok = members(field, (c) => {
    const item = parseItem(c);
    if (item) out.push(item);
    return item !== undefined;
  });
  return ok ? out : undefined;
}

/** An RFC 9651 Dictionary (a member without `=` is `true`), or `undefined` when it does not parse. */
export function parseDictionary(field: string): Map<string, SfItem> | undefined {
  const out = new Map<string, SfItem>();
  const ok = members(field, (c) => {
    const key = parseKey(c);
    if (key === undefined) return false;
    let item: SfItem | undefined;
    if (c.peek() === '=') {
      c.i++;
      item = parseItem(c);
    } else {
      const params = parseParams(c);
      item = params && { value: true, params };
    }
    if (item) out.set(key, item);
    return item !== undefined;
  });
  return ok ? out : undefined;
}
