import Foundation

/// A parsed JSON value, as pipeline definitions are read before validation.
///
/// ```swift
/// let options: JSONValue = .object([("width", 300), ("mode", "fit")])
/// options["width"]?.intValue   // 300
/// options.jsonText             // {"width":300,"mode":"fit"}
/// ```
public enum JSONValue: Sendable, Equatable, CustomStringConvertible {
  case null
  case bool(Bool)
  /// A number, with its source text so that huge or precise values are reported as written.
  case number(Double, text: String)
  case string(String)
  case array([JSONValue])
  /// An object; keys keep the order they were written in.
  case object([(key: String, value: JSONValue)])

  public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
    switch (lhs, rhs) {
    case (.null, .null): true
    case (.bool(let a), .bool(let b)): a == b
    case (.number(let a, _), .number(let b, _)): a == b
    case (.string(let a), .string(let b)): a == b
    case (.array(let a), .array(let b)): a == b
    case (.object(let a), .object(let b)): a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    default: false
    }
  }

  /// The value of `key` in an object.
  public subscript(key: String) -> JSONValue? {
    guard case .object(let members) = self else { return nil }
    return members.first { $0.key == key }?.value
  }

  /// A number that is a whole number within `Int`'s range, if this is one.
  public var intValue: Int? {
    guard case .number(let value, _) = self, value.rounded() == value, abs(value) < 9.0e15 else { return nil }
    return Int(value)
  }

  /// A short description for messages: the value itself when short, its kind otherwise.
  public var description: String {
    switch self {
    case .null: return "null"
    case .bool(let value): return String(value)
    case .number(_, let text): return text.count > 24 ? String(text.prefix(21)) + "..." : text
    case .string(let text):
      let shown = text.count > 40 ? String(text.prefix(37)) + "..." : text
      return "\"\(shown)\""
    case .array(let items): return "an array of \(items.count)"
    case .object: return "an object"
    }
  }

  /// The JSON kind, for messages ("a string", "a number").
  public var kindDescription: String {
    switch self {
    case .null: "null"
    case .bool: "a boolean"
    case .number: "a number"
    case .string: "a string"
    case .array: "an array"
    case .object: "an object"
    }
  }

  /// Serialises the value as JSON text.
  public var jsonText: String {
    switch self {
    case .null: return "null"
    case .bool(let value): return value ? "true" : "false"
    case .number(let value, let text): return text.isEmpty ? String(value) : text
    case .string(let text): return JSONValue.quote(text)
    case .array(let items): return "[" + items.map(\.jsonText).joined(separator: ",") + "]"
    case .object(let members):
      return "{" + members.map { JSONValue.quote($0.key) + ":" + $0.value.jsonText }.joined(separator: ",") + "}"
    }
  }

  static func quote(_ text: String) -> String {
    var out = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": out += "\\\""
      case "\\": out += "\\\\"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      case "\t": out += "\\t"
      case let c where c.value < 0x20: out += String(format: "\\u%04x", c.value)
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out + "\""
  }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
  ExpressibleByBooleanLiteral
{
  public init(stringLiteral value: String) { self = .string(value) }
  public init(integerLiteral value: Int) { self = .number(Double(value), text: String(value)) }
  public init(floatLiteral value: Double) { self = .number(value, text: String(value)) }
  public init(booleanLiteral value: Bool) { self = .bool(value) }
}
