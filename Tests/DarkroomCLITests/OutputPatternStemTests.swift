import DarkroomCore
import Testing

@testable import DarkroomCLI

/// An output pattern's template is read once into pieces around `{name}`
/// (``OutputPattern/stemPieces``); the stems made from them are those the template filled for each
/// input gives.
@Suite("Output pattern stems")
struct OutputPatternStemTests {
  /// The reading the pieces replaced: the whole template filled for each input.
  static func reference(_ pattern: OutputPattern, name: String) -> String {
    var values = ["{variant}": pattern.variant ?? pattern.pipeline, "{pipeline}": pattern.pipeline, "{name}": name]
    for placeholder in OutputPattern.imagePlaceholders { values[placeholder] = "" }
    return (pattern.directory + "/" + Writer.fill(pattern.template, values)).lowercased()
  }

  @Test("stems from the pieces equal the filled template, for templates and names with braces, unknown and unclosed placeholders")
  func piecesMatchTheFilledTemplate() {
    let parts = [
      "{name}", "{variant}", "{pipeline}", "{width}", "{ext}", "{format}", "{height}", "{unknown}", "{", "}", "{{name}",
      "{name}}", "-", ".", "/", "É", "a", "x{", "{na", "me}", "\u{301}",
    ]
    let names = ["a", "IMG_1", "{name}", "{variant}", "x}{", "É\u{301}", ""]
    let texts = ["", "p", "P{name}", "{ext}", "V-1", "ü"]
    var generator = SystemRandomNumberGenerator()
    for _ in 0..<5_000 {
      let template = (0..<Int.random(in: 0...6, using: &generator)).map { _ in parts.randomElement(using: &generator) ?? "" }
        .joined()
      let pattern = OutputPattern(
        directory: texts.randomElement(using: &generator) ?? "", template: template,
        pipeline: texts.randomElement(using: &generator) ?? "",
        variant: Bool.random(using: &generator) ? nil : texts.randomElement(using: &generator))
      let pieces = pattern.stemPieces
      for name in names {
        #expect(OutputPattern.stem(pieces, name: name) == Self.reference(pattern, name: name), "\(pattern) \(name)")
      }
    }
  }
}
