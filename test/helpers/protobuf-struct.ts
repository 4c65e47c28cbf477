// google.protobuf.Struct exactly as a client built from the protos decodes it (proto-loader with
// the project's options: every Value names its `kind`). Tests write the expected metadata as a
// plain object and compare the decoded Struct with `toEqual`, so a number that arrives as a
// string, a missing key or an extra key all fail.

export type Plain = string | number | boolean | null | readonly Plain[] | { readonly [key: string]: Plain };

export type DecodedValue =
  | { kind: 'nullValue'; nullValue: 'NULL_VALUE' }
  | { kind: 'numberValue'; numberValue: number }
  | { kind: 'stringValue'; stringValue: string }
  | { kind: 'boolValue'; boolValue: boolean }
  | { kind: 'structValue'; structValue: DecodedStruct }
  | { kind: 'listValue'; listValue: { values: DecodedValue[] } };

export interface DecodedStruct {
  fields: Record<string, DecodedValue>;
}

function value(v: Plain): DecodedValue {
  if (v === null) return { kind: 'nullValue', nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { kind: 'numberValue', numberValue: v };
  if (typeof v === 'string') return { kind: 'stringValue', stringValue: v };
  if (typeof v === 'boolean') return { kind: 'boolValue', boolValue: v };
  if (Array.isArray(v)) return { kind: 'listValue', listValue: { values: (v as readonly Plain[]).map(value) } };
  return { kind: 'structValue', structValue: struct(v as { readonly [key: string]: Plain }) };
}

/** The decoded google.protobuf.Struct that carries `obj`. */
export function struct(obj: { readonly [key: string]: Plain }): DecodedStruct {
  const fields: Record<string, DecodedValue> = {};
  for (const [k, v] of Object.entries(obj)) fields[k] = value(v);
  return { fields };
}
