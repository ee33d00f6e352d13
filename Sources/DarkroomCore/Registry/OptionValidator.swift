/// Checks JSON option values against ``OptionSpec``s and fills in defaults.
package enum OptionValidator {
  /// Validates the members of an object against `specs`; returns the object with defaults filled
  /// in and every problem found. `ignoring` names keys handled elsewhere (`"stage"`).
  package static func validate(
    _ members: [(key: String, value: JSONValue)], specs: [OptionSpec], path: String, owner: String, ignoring: Set<String> = []
  ) -> (filled: JSONValue, issues: [PipelineError.Issue]) {
    var issues: [PipelineError.Issue] = []
    var filled: [(key: String, value: JSONValue)] = []
    let names = specs.map(\.name)
    for (key, value) in members where !ignoring.contains(key) {
      guard let spec = specs.first(where: { $0.name == key }) else {
        var message = "unknown option \"\(key)\" for \(owner)"
        if let guess = Suggestion.closest(to: key, in: names) {
          message += "; did you mean \"\(guess)\"?"
        } else if names.isEmpty {
          message += ", which takes no options"
        } else {
          message += "; its options are " + names.map { "\"\($0)\"" }.joined(separator: ", ")
        }
        issues.append(.init(code: .invalidDefinition, path: "\(path).\(key)", message: message))
        continue
      }
      let (checked, problems) = check(value, against: spec.type, path: "\(path).\(key)")
      issues += problems
      filled.append((key, checked))
    }
    for spec in specs where !members.contains(where: { $0.key == spec.name }) {
      if let defaultValue = spec.defaultValue {
        filled.append((spec.name, defaultValue))
      } else if spec.required {
        issues.append(
          .init(
            code: .invalidDefinition, path: path,
            message: "\(owner) needs the option \"\(spec.name)\" (\(spec.type.expectation)): \(spec.summary)"))
      }
    }
    return (.object(filled), issues)
  }

  /// Checks one value; returns it (objects with their defaults filled in) and its problems.
  static func check(_ value: JSONValue, against type: OptionType, path: String) -> (JSONValue, [PipelineError.Issue]) {
    func wrong() -> [PipelineError.Issue] {
      [.init(code: .invalidDefinition, path: path, message: "expected \(type.expectation), got \(value)")]
    }
    switch type {
    case .integer(let min, let max):
      guard let number = value.intValue else {
        if case .number(let raw, _) = value, raw.rounded() == raw {
          return (
            value,
            [
              .init(
                code: .invalidDefinition, path: path, message: "expected \(type.expectation), got \(value), which is too large")
            ]
          )
        }
        return (value, wrong())
      }
      if let min, number < min { return (value, wrong()) }
      if let max, number > max { return (value, wrong()) }
    case .number(let min, let max):
      guard case .number(let number, _) = value else { return (value, wrong()) }
      if let min, number < min { return (value, wrong()) }
      if let max, number > max { return (value, wrong()) }
    case .string:
      guard case .string = value else { return (value, wrong()) }
    case .boolean:
      guard case .bool = value else { return (value, wrong()) }
    case .choiceOrFalse(let values):
      if case .bool(false) = value { break }
      guard case .string = value else { return (value, wrong()) }
      let (_, issues) = check(value, against: .choice(values), path: path)
      if !issues.isEmpty { return (value, wrong()) }
    case .choice(let values):
      guard case .string(let text) = value else { return (value, wrong()) }
      if !values.contains(text) {
        var message = "expected \(type.expectation), got \(value)"
        if let guess = Suggestion.closest(to: text, in: values) { message += "; did you mean \"\(guess)\"?" }
        return (value, [.init(code: .invalidDefinition, path: path, message: message)])
      }
    case .object(let specs):
      guard case .object(let members) = value else { return (value, wrong()) }
      let (filled, issues) = validate(members, specs: specs, path: path, owner: "\"\(path)\"")
      return (filled, issues)
    case .stringList:
      guard case .array(let items) = value else { return (value, wrong()) }
      let bad = items.enumerated().filter { if case .string = $0.element { false } else { true } }
      return (
        value,
        bad.map {
          .init(code: .invalidDefinition, path: "\(path)[\($0.offset)]", message: "expected a string, got \($0.element)")
        }
      )
    case .stringMap:
      guard case .object(let members) = value else { return (value, wrong()) }
      let bad = members.filter { if case .string = $0.value { false } else { true } }
      return (
        value,
        bad.map { .init(code: .invalidDefinition, path: "\(path).\($0.key)", message: "expected a string, got \($0.value)") }
      )
    }
    return (value, [])
  }
}
