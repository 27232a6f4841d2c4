/**
 * The shape the project's list files share (`--engines_file`, `--models_file`): a JSON object
 * whose one field is an array of entries, `{"<field>": [...]}`. Parses the text and checks that
 * shape; each file's own parser checks the entries.
 */
import { ConfigError } from './config-error.js';
import { object, show, unknownFields } from './kv-events-config.js';

/**
 * The entries of `{"<field>": [...]}`; throws ConfigError ('' for bad JSON or a non-object root,
 * `<field>` when it is missing — `requiredReason` — or not an array, another key when present).
 */
export function jsonRootList(text: string, field: string, requiredReason: string): readonly unknown[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new ConfigError('', `not valid JSON: ${e instanceof Error ? e.message.split('\n')[0]! : 'syntax error'}`);
  }
  const root = object(json, '');
  unknownFields(root, [field], '');
  const list = root[field];
  if (list === undefined) throw new ConfigError(field, requiredReason);
  if (!Array.isArray(list)) throw new ConfigError(field, `expected an array, got ${show(list)}`);
  return list;
}
