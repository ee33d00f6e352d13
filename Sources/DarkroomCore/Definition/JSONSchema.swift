/// Generates a JSON Schema (draft 2020-12) for pipeline definitions from a registry, so editors can
/// complete and check pipeline files (`darkroom schema`).
///
/// ```swift
/// print(JSONSchema.document(for: Darkroom.standardRegistry).prettyText)
/// ```
package enum JSONSchema {
  /// The schema of a whole definition file.
  public static func document(for registry: StageRegistry) -> JSONValue {
    let stageSchemas = registry.allEntries.map { entry -> JSONValue in
      var properties: [(key: String, value: JSONValue)] = [
        ("stage", .object([("const", .string(entry.kind)), ("description", .string(entry.summary))]))
      ]
      properties += entry.specs.map { ($0.name, schema(for: $0)) }
      var members: [(key: String, value: JSONValue)] = [
        ("type", "object"), ("title", .string(entry.kind)), ("description", .string(entry.summary)),
        ("properties", .object(properties)), ("additionalProperties", false),
      ]
      let required = ["stage"] + entry.specs.filter(\.required).map(\.name)
      members.append(("required", .array(required.map { .string($0) })))
      return .object(members)
    }
    let number: (Int) -> JSONValue = { .number(Double($0), text: String($0)) }
    return .object([
      ("$schema", "https://json-schema.org/draft/2020-12/schema"),
      ("title", "Darkroom pipeline"),
      ("type", "object"),
      ("required", .array(["version", "stages"])),
      ("additionalProperties", false),
      (
        "properties",
        .object([
          (
            "version",
            .object([
              ("enum", .array(PipelineDefinition.supportedVersions.map(number))),
              ("description", "The definition format version."),
            ])
          ),
          (
            "name",
            .object([("type", "string"), ("minLength", 1), ("description", "The pipeline name, used in events and file names.")])
          ),
          ("description", .object([("type", "string"), ("description", "Free text for people.")])),
          (
            "fusion",
            .object([("type", "boolean"), ("default", true), ("description", "Let the optimizer fuse stages (shrink-on-load).")])
          ),
          ("stages", .object([("type", "array"), ("minItems", 1), ("items", .object([("oneOf", .array(stageSchemas))]))])),
          (
            "variants",
            .object([
              ("type", "array"), ("minItems", 1),
              ("description", "Named outputs after the shared stages: each variant's own stages follow them."),
              (
                "items",
                .object([
                  ("type", "object"), ("additionalProperties", false), ("required", .array(["name", "stages"])),
                  (
                    "properties",
                    .object([
                      ("name", .object([("type", "string"), ("pattern", "^[A-Za-z0-9._-]{1,64}$")])),
                      (
                        "stages",
                        .object([("type", "array"), ("minItems", 1), ("items", .object([("oneOf", .array(stageSchemas))]))])
                      ),
                    ])
                  ),
                ])
              ),
            ])
          ),
        ])
      ),
    ])
  }

  static func schema(for spec: OptionSpec) -> JSONValue {
    var members = typeSchema(spec.type)
    members.append(("description", .string(spec.summary)))
    if let value = spec.defaultValue { members.append(("default", value)) }
    return .object(members)
  }

  static func typeSchema(_ type: OptionType) -> [(key: String, value: JSONValue)] {
    let num: (Double) -> JSONValue = { .number($0, text: OptionType.format($0)) }
    switch type {
    case .integer(let min, let max):
      var members: [(key: String, value: JSONValue)] = [("type", "integer")]
      if let min { members.append(("minimum", num(Double(min)))) }
      if let max { members.append(("maximum", num(Double(max)))) }
      return members
    case .number(let min, let max):
      var members: [(key: String, value: JSONValue)] = [("type", "number")]
      if let min { members.append(("minimum", num(min))) }
      if let max { members.append(("maximum", num(max))) }
      return members
    case .string: return [("type", "string")]
    case .boolean: return [("type", "boolean")]
    case .choice(let values): return [("type", "string"), ("enum", .array(values.map { .string($0) }))]
    case .choiceOrFalse(let values): return [("enum", .array(values.map { .string($0) } + [false]))]
    case .object(let specs):
      return [
        ("type", "object"), ("properties", .object(specs.map { ($0.name, schema(for: $0)) })),
        ("required", .array(specs.filter(\.required).map { .string($0.name) })), ("additionalProperties", false),
      ]
    case .stringMap: return [("type", "object"), ("additionalProperties", .object([("type", "string")]))]
    case .stringList: return [("type", "array"), ("items", .object([("type", "string")]))]
    }
  }
}

extension JSONValue {
  /// Indented JSON text.
  public var prettyText: String { pretty(indent: "") }

  private func pretty(indent: String) -> String {
    let inner = indent + "  "
    switch self {
    case .array(let items) where !items.isEmpty:
      if items.allSatisfy({ if case .object = $0 { false } else if case .array = $0 { false } else { true } }) {
        return "[" + items.map(\.jsonText).joined(separator: ", ") + "]"
      }
      return "[\n" + items.map { inner + $0.pretty(indent: inner) }.joined(separator: ",\n") + "\n" + indent + "]"
    case .object(let members) where !members.isEmpty:
      return "{\n"
        + members.map { inner + JSONValue.quote($0.key) + ": " + $0.value.pretty(indent: inner) }.joined(separator: ",\n") + "\n"
        + indent + "}"
    default:
      return jsonText
    }
  }
}
