/// JSON options of the `save` stage.
package struct SaveOptions: StageOptions {
  public var template: String

  public static let specs = [
    OptionSpec(
      "template", .string, default: "{name}.{ext}", "The file name: {name} and {ext} (from the sniffed format); no \"..\".")
  ]

  public func problems() -> [OptionProblem] {
    var problems = Writer.problems(in: template).map { OptionProblem(option: "template", $0) }
    for placeholder in ["{variant}", "{pipeline}", "{width}", "{height}", "{format}"] where template.contains(placeholder) {
      problems.append(
        OptionProblem(option: "template", "\(placeholder) is not known to \"save\", which only fills {name} and {ext}"))
    }
    return problems
  }
}
