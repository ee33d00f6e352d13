import Foundation

/// A JSON document of options that is not a pipeline (a server's configuration file), checked
/// like a stage's options: every member against its ``OptionSpec``, defaults filled in, then
/// ``StageOptions/problems()``; every problem is reported at once with its JSON path.
///
/// ```swift
/// let settings = try OptionDocument.decode(ServerSettings.self, json: text, owner: "the server configuration")
/// ```
package enum OptionDocument {
  /// Decodes `json` (an object) as `O`. Throws `invalidDefinition` listing every problem, each
  /// with its path (`formats[1]`, `cache.bytes`).
  package static func decode<O: StageOptions>(_ type: O.Type, json: String, owner: String) throws(PipelineError) -> O {
    let document = try JSONParser.parse(json)
    guard case .object(let members) = document else {
      throw PipelineError(.invalidDefinition, "\(owner) must be a JSON object, got \(document)")
    }
    let (filled, found) = OptionValidator.validate(members, specs: O.specs, path: "", owner: owner)
    let issues = found.map { issue in
      var issue = issue
      if issue.path.hasPrefix(".") { issue.path.removeFirst() }
      return issue
    }
    guard issues.isEmpty else { throw PipelineDefinition.combined(issues) }
    let decoded: O
    do {
      decoded = try JSONDecoder().decode(O.self, from: Data(filled.jsonText.utf8))
    } catch {
      throw PipelineError(.invalidDefinition, "\(owner) could not be read: \(error)")
    }
    let problems = decoded.problems().map {
      PipelineError.Issue(code: .invalidDefinition, path: $0.option ?? "", message: $0.message)
    }
    guard problems.isEmpty else { throw PipelineDefinition.combined(problems) }
    return decoded
  }
}
