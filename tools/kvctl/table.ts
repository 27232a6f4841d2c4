/**
 * Plain-text tables for kvctl: a header row and rows of cells, each column padded to its widest
 * cell, two spaces between columns, no trailing spaces. Pure (strings in, string out), so the
 * layout is unit-tested without a directory.
 */

export type Align = 'left' | 'right';

export interface Column {
  readonly header: string;
  /** Numbers read best right-aligned; default left. */
  readonly align?: Align;
}

const GAP = '  ';

/** Width in terminal columns, counting code points (not UTF-16 units) so `é` or `→` is one. */
function width(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** A cell is one line: newlines and tabs (e.g. in an error string) would break the grid. */
export function oneLine(text: string): string {
  return text.replace(/[\r\n\t]+/g, ' ');
}

function pad(text: string, to: number, align: Align): string {
  const fill = ' '.repeat(Math.max(0, to - width(text)));
  return align === 'right' ? fill + text : text + fill;
}

/**
 * The header line, then one line per row, each ending in '\n'. Throws RangeError when a row's
 * cell count differs from the column count (a caller bug, never a data problem).
 */
export function formatTable(columns: readonly Column[], rows: readonly (readonly string[])[]): string {
  const widths = columns.map((c) => width(c.header));
  const cleaned = rows.map((row, r) => {
    if (row.length !== columns.length) throw new RangeError(`row ${r} has ${row.length} cells, expected ${columns.length}`);
    return row.map((cell, i) => {
      const text = oneLine(cell);
      widths[i] = Math.max(widths[i]!, width(text));
      return text;
    });
  });
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, i) => pad(cell, widths[i]!, columns[i]!.align ?? 'left'))
      .join(GAP)
      .trimEnd() + '\n';
  return line(columns.map((c) => c.header)) + cleaned.map(line).join('');
}

/** `key  value` lines with the keys padded to the longest, for single-record answers (stats). */
export function formatKeyValues(pairs: readonly (readonly [string, string])[]): string {
  const keyWidth = pairs.reduce((w, [k]) => Math.max(w, width(k)), 0);
  return pairs.map(([k, v]) => `${pad(k, keyWidth, 'left')}${GAP}${oneLine(v)}`.trimEnd() + '\n').join('');
}
