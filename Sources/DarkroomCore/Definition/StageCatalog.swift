/// Describes registered stage kinds for people: `darkroom stages` and the generated
/// `Docs/Stages.md`.
///
/// ```swift
/// print(StageCatalog.markdown(for: Darkroom.standardRegistry))
/// ```
package enum StageCatalog {
  /// A Markdown reference of every kind: summary, input → output, options table.
  public static func markdown(for registry: StageRegistry) -> String {
    var out = "# Stage reference\n\n"
    out += "Generated from the stage registry by `darkroom stages --markdown`; do not edit by hand.\n"
    for entry in registry.allEntries {
      out += "\n## `\(entry.kind)`\n\n\(entry.summary)\n\n"
      out += "Input: \(valueDescription(of: entry.inputType)). Output: \(valueDescription(of: entry.outputType)).\n\n"
      if entry.specs.isEmpty {
        out += "No options.\n"
        continue
      }
      out += "| option | type | default | meaning |\n|---|---|---|---|\n"
      for row in rows(entry.specs, prefix: "") { out += row + "\n" }
    }
    return out
  }

  static func rows(_ specs: [OptionSpec], prefix: String) -> [String] {
    specs.flatMap { spec -> [String] in
      let defaultText = spec.defaultValue.map { "`\($0.jsonText)`" } ?? (spec.required ? "required" : "—")
      let row = "| `\(prefix)\(spec.name)` | \(spec.type.expectation) | \(defaultText) | \(spec.summary) |"
      if case .object(let nested) = spec.type { return [row] + rows(nested, prefix: "\(prefix)\(spec.name).") }
      return [row]
    }
  }

  /// A plain-text listing for terminals.
  public static func text(for registry: StageRegistry) -> String {
    var out = ""
    for entry in registry.allEntries {
      out += "\(entry.kind): \(entry.summary)\n"
      out += "  \(valueDescription(of: entry.inputType)) -> \(valueDescription(of: entry.outputType))\n"
      for line in lines(entry.specs, prefix: "") { out += "  " + line + "\n" }
      out += "\n"
    }
    return out
  }

  static func lines(_ specs: [OptionSpec], prefix: String) -> [String] {
    specs.flatMap { spec -> [String] in
      let defaultText = spec.defaultValue.map { " = \($0.jsonText)" } ?? (spec.required ? " (required)" : "")
      let line = "\(prefix)\(spec.name): \(spec.type.expectation)\(defaultText) — \(spec.summary)"
      if case .object(let nested) = spec.type { return [line] + lines(nested, prefix: "\(prefix)\(spec.name).") }
      return [line]
    }
  }
}
