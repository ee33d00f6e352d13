import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Loads pipelines from JSON: parses, validates everything, and builds the stage graph.
///
/// Nothing runs until the whole definition is valid. Every problem is reported at once, each with
/// its JSON path and a fix: malformed JSON (line and column), unsupported `version`, unknown stage
/// kinds (with the closest known kind), unknown or mistyped options, out-of-range values, and
/// neighbours that do not fit ("stages[2] \"resize\" needs an image but stages[1] \"fetch\" produces
/// bytes: add a \"decode\" stage between them").
///
/// ```swift
/// let graph = try PipelineDefinition.load(contentsOf: "Examples/pipelines/thumbnail.json", registry: Darkroom.standardRegistry)
/// let operation = PipelineExecutor().start(graph, input: ImageSource("photo.jpg"), as: (any Sendable).self)
/// ```
public enum PipelineDefinition {
  /// The definition versions this build reads.
  public static let supportedVersions = [1]
  /// Keys allowed at the top of a definition.
  public static let rootKeys = ["version", "name", "description", "fusion", "stages", "variants"]
  /// The most stages a pipeline (or a variant, its shared stages included) may have.
  public static let maxStages = 64
  /// The most variants a pipeline file may declare.
  public static let maxVariants = 64
  /// The largest definition file accepted.
  public static let maxFileBytes = 1 << 20

  /// Reads and loads a definition file.
  public static func load(
    contentsOf path: String, registry: StageRegistry, context: StageBuildContext = StageBuildContext()
  ) throws(PipelineError) -> StageGraph {
    let (text, stem) = try readDefinition(path)
    do {
      return try load(json: text, registry: registry, context: context, defaultName: stem)
    } catch {
      var located = error
      located.message = "\(path): \(error.message)"
      located.source = path
      throw located
    }
  }

  /// The text of a definition file (size-limited, UTF-8) and its name without extension.
  package static func readDefinition(_ path: String) throws(PipelineError) -> (text: String, stem: String) {
    let data: Data
    do {
      data = try BoundedFileReader.read(path, limit: maxFileBytes)
    } catch {
      switch error {
      case .tooLarge:
        throw PipelineError(.invalidDefinition, "\(path) is over \(maxFileBytes) bytes; pipeline files are limited to that")
      case .notRegular:
        throw PipelineError(.invalidDefinition, "\(path) is not a regular file; give a pipeline JSON file", source: path)
      case .system(let code):
        let missing = code == ENOENT
        throw PipelineError(
          missing ? .notFound : .accessDenied,
          missing ? "pipeline file \(path) does not exist" : "cannot read pipeline file \(path): \(error)", source: path)
      }
    }
    guard let text = String(data: data, encoding: .utf8) else {
      throw PipelineError(.invalidDefinition, "\(path) is not UTF-8 text; a pipeline file is JSON", source: path)
    }
    return (text, PathText.stem(path))
  }

  public static func load(
    json: String, registry: StageRegistry, context: StageBuildContext = StageBuildContext(), defaultName: String = "pipeline"
  ) throws(PipelineError) -> StageGraph {
    let set = try loadSet(json: json, registry: registry, context: context, defaultName: defaultName)
    guard !set.hasVariants, let only = set.variants.first else {
      throw PipelineError(
        .invalidDefinition,
        "pipeline \"\(set.name)\" declares variants (\(set.variants.compactMap(\.name).joined(separator: ", "))): "
          + "load it with PipelineDefinition.loadSet and run it as PipelineVariants")
    }
    return only.graph
  }

  /// A variant name: it becomes part of file names (`{name}-{variant}.{ext}`).
  static func isVariantName(_ name: String) -> Bool {
    !name.isEmpty && name.count <= 64 && name != "." && name != ".."
      && name.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "-_.".unicodeScalars.contains($0) }
  }

  /// Loads a definition that may declare `variants`: one graph per variant (the shared `stages`
  /// followed by the variant's own), or the one graph of a definition without variants.
  ///
  /// ```json
  /// {"version": 1, "name": "avatar", "stages": [{"stage": "fetch"}, {"stage": "decode"}],
  ///  "variants": [{"name": "64", "stages": [{"stage": "resize", "width": 64}, {"stage": "encode", "format": "webp"}]},
  ///               {"name": "128", "stages": [{"stage": "resize", "width": 128}, {"stage": "encode", "format": "webp"}]}]}
  /// ```
  package static func loadSet(
    json: String, registry: StageRegistry, context: StageBuildContext = StageBuildContext(), defaultName: String = "pipeline"
  ) throws(PipelineError) -> PipelineSet {
    let document = try JSONParser.parse(json)
    var loader = Loader(registry: registry, context: context)
    let set = loader.buildSet(document, defaultName: defaultName)
    guard let set, loader.issues.isEmpty else { throw combined(loader.issues) }
    return set
  }

  /// ``loadSet(json:registry:context:defaultName:)`` from a file.
  package static func loadSet(
    contentsOf path: String, registry: StageRegistry, context: StageBuildContext = StageBuildContext()
  ) throws(PipelineError) -> PipelineSet {
    let (text, stem) = try readDefinition(path)
    do {
      return try loadSet(json: text, registry: registry, context: context, defaultName: stem)
    } catch {
      var located = error
      located.message = "\(path): \(error.message)"
      located.source = path
      throw located
    }
  }

  /// One error holding every issue, its code the first issue's code.
  package static func combined(_ issues: [PipelineError.Issue]) -> PipelineError {
    let first = issues.first ?? .init(code: .invalidDefinition, path: "", message: "invalid definition")
    let message =
      issues.count == 1
      ? first.description : "\(issues.count) problems:\n" + issues.map { "  " + $0.description }.joined(separator: "\n")
    return PipelineError(first.code, message, path: first.path, issues: issues)
  }
}
