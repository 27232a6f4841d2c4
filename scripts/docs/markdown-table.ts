/**
 * GitHub-flavoured Markdown tables for the generated references. Cells are plain text: a `|` is
 * escaped and line breaks become spaces, so a help line or a proto comment can never break a row.
 */

/** One table: a header row, the delimiter row and one row per entry. */
export function markdownTable(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const lines = [row(headers), row(headers.map(() => '---'))];
  for (const r of rows) {
    if (r.length !== headers.length) throw new Error(`table row has ${r.length} cells, expected ${headers.length}: ${r.join(' | ')}`);
    lines.push(row(r));
  }
  return lines.join('\n');
}

/** Inline code that survives backticks inside the value (Markdown's longer-fence rule). */
export function code(text: string): string {
  if (text === '') return '""';
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = '`'.repeat(longest + 1);
  const pad = text.startsWith('`') || text.endsWith('`') ? ' ' : '';
  return `${fence}${pad}${text}${pad}${fence}`;
}

function row(cells: readonly string[]): string {
  return `| ${cells.map(cell).join(' | ')} |`;
}

function cell(text: string): string {
  return text.replace(/\r?\n/g, ' ').replace(/\|/g, '\\|').trim();
}
