/**
 * Cycles in an import graph (file → files it imports, or folder → folders), for the layering
 * tests: every path that comes back to a node on it, of any length, as `a -> b -> a`.
 */
export function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[] {
  const done = new Set<string>();
  const cycles: string[] = [];
  const visit = (node: string, path: string[]): void => {
    if (path.includes(node)) {
      cycles.push([...path.slice(path.indexOf(node)), node].join(' -> '));
      return;
    }
    if (done.has(node)) return;
    for (const next of graph.get(node) ?? []) visit(next, [...path, node]);
    done.add(node);
  };
  for (const node of graph.keys()) visit(node, []);
  return cycles;
}
