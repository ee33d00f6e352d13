import Darkroom
import Foundation
import Logging

/// The presets of a server: pipeline files in a folder, without their `fetch` and `write`
/// stages, served at `/{signature}/p/{name}/{IMAGE}`.
///
/// A preset named `thumb` is the file `thumb.json`; names are letters, digits, `-` and `_`. Each
/// file is validated as a pipeline file is, and must take fetched bytes (start with `decode`) and
/// end with `encode`. A `"fallback"` key may name an image in the presets folder that is served,
/// at the requested size, when a request with the preset fails. ``reload()`` reads the files that changed: a preset that no longer validates
/// keeps its last good version, and the problem is logged. ``watch(every:)`` reloads until
/// cancelled.
///
/// ```swift
/// let presets = PresetLibrary(directory: "presets", logger: Logger(label: "presets"))
/// presets.reload()
/// let thumb = try presets.preset(named: "thumb")
/// print(thumb.stages.map(\.kind))   // ["decode", "resize", "encode"]
/// ```
public final class PresetLibrary: Sendable {
  /// A loaded preset.
  public struct Preset: Sendable {
    public var name: String
    /// The stages, `decode` … `encode`.
    public var stages: [AnyStage]
    /// The preset's own fallback image (its `"fallback"` key: a file in the presets folder),
    /// served instead of the server's when a request fails.
    public var fallbackImage: String?
  }

  private struct Loaded {
    var preset: Preset?
    var version: FileStamp
  }

  private struct FileStamp: Equatable {
    var modified: Date
    var size: Int
  }

  /// The folder the presets are read from.
  public let directory: String
  private let registry: StageRegistry
  private let logger: Logger
  private let presets = Protected<[String: Loaded]>([:])
  /// The most preset files read from the folder.
  public static let maxPresets = 1_000

  /// Where files that presets name (an `overlay`'s watermark) are read from, beneath it only: the
  /// server's `root`; anywhere the process can read when `nil`.
  public let allowedRoot: String?

  public init(
    directory: String, registry: StageRegistry = Darkroom.standardRegistry, allowedRoot: String? = nil, logger: Logger
  ) {
    self.directory = directory
    self.registry = registry
    self.allowedRoot = allowedRoot
    self.logger = logger
  }

  /// Whether `name` can name a preset.
  public static func isName(_ name: some StringProtocol) -> Bool {
    !name.isEmpty && name.count <= 64
      && name.unicodeScalars.allSatisfy { ($0.isASCII && CharacterSet.alphanumerics.contains($0)) || $0 == "-" || $0 == "_" }
  }

  /// The preset `name`; throws `invalidInput` when there is none (or none that ever validated).
  public func preset(named name: String) throws(PipelineError) -> Preset {
    guard let preset = presets.withLock({ $0[name]?.preset }) else {
      throw PipelineError(.invalidInput, "there is no preset named \(name.prefix(64))")
    }
    return preset
  }

  /// The names of the presets that validated.
  public var names: [String] { presets.withLock { $0.compactMap { $0.value.preset == nil ? nil : $0.key }.sorted() } }

  /// Reads the preset files that are new or changed since the last call, and forgets removed
  /// ones. Returns the problems of the files that did not validate (their last good version
  /// stays). Reads the file system: call it off the cooperative pool.
  @discardableResult
  public func reload() -> [String: PipelineError] {
    let manager = FileManager.default
    let files = ((try? manager.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
      .prefix(Self.maxPresets)
    var problems: [String: PipelineError] = [:]
    var seen: Set<String> = []
    for file in files {
      let name = String(file.dropLast(5))
      guard Self.isName(name) else { continue }
      seen.insert(name)
      let path = directory + "/" + file
      guard let attributes = try? manager.attributesOfItem(atPath: path),
        attributes[.type] as? FileAttributeType == .typeRegular
      else { continue }
      let stamp = FileStamp(
        modified: attributes[.modificationDate] as? Date ?? .distantPast, size: (attributes[.size] as? Int) ?? 0)
      if presets.withLock({ $0[name]?.version }) == stamp { continue }
      do {
        let preset = try load(path: path, name: name)
        presets.withLock { $0[name] = Loaded(preset: preset, version: stamp) }
        logger.info("preset loaded", metadata: ["preset": "\(name)"])
      } catch {
        problems[name] = error
        presets.withLock { $0[name, default: Loaded(preset: nil, version: stamp)].version = stamp }
        logger.error(
          "preset does not validate; its last good version stays", metadata: ["preset": "\(name)", "error": "\(error.message)"])
      }
    }
    presets.withLock { loaded in
      for name in loaded.keys where !seen.contains(name) { loaded[name] = nil }
    }
    return problems
  }

  /// Reloads every `interval` until the task is cancelled.
  public func watch(every interval: Duration = .seconds(1)) async {
    while !Task.isCancelled {
      try? await Task.sleep(for: interval)
      guard !Task.isCancelled else { return }
      _ = try? await BlockingPool.shared.run { self.reload() }
    }
  }

  private func load(path: String, name: String) throws(PipelineError) -> Preset {
    let (text, stem) = try PipelineDefinition.readDefinition(path)
    // The server's fetch goes first: the file's stages are checked as they will run, and the
    // problems are reported with the file's own stage numbers.
    guard case .object(var members) = try JSONParser.parse(text),
      case .array(let stages)? = members.first(where: { $0.key == "stages" })?.value
    else {
      _ = try PipelineDefinition.load(
        json: text, registry: registry, context: StageBuildContext(allowedRoot: allowedRoot), defaultName: stem)
      throw PipelineError(.invalidDefinition, "\(path): a preset needs a \"stages\" array")
    }
    var fallback: String?
    if let fallbackIndex = members.firstIndex(where: { $0.key == "fallback" }) {
      guard case .string(let name) = members[fallbackIndex].value, Self.isFallbackName(name) else {
        throw PipelineError(
          .invalidDefinition, "\(path): fallback: expected the name of an image in the presets folder, like \"placeholder.png\"")
      }
      fallback = directory + "/" + name
      members.remove(at: fallbackIndex)
    }
    let kinds = stages.compactMap { stage -> String? in
      if case .string(let kind)? = stage["stage"] { return kind }
      return nil
    }
    let forbidden = kinds.filter { ["fetch", "write", "save"].contains($0) }
    guard forbidden.isEmpty else {
      throw PipelineError(
        .invalidDefinition,
        "\(path): a preset has no \(forbidden.joined(separator: ", ")) stage: the server fetches the image and answers with it")
    }
    // Rebuilt rather than patched in place: the fallback key may have moved the stages.
    members = members.map { $0.key == "stages" ? ($0.key, .array([.object([("stage", .string("fetch"))])] + stages)) : $0 }
    let graph: StageGraph
    do {
      graph = try PipelineDefinition.load(
        json: JSONValue.object(members).jsonText, registry: registry, context: StageBuildContext(allowedRoot: allowedRoot),
        defaultName: stem)
    } catch {
      var renumbered = error
      renumbered.message = "\(path): " + Self.renumbered(error.message)
      renumbered.issues = error.issues.map { issue in
        var issue = issue
        issue.path = Self.renumbered(issue.path)
        issue.message = Self.renumbered(issue.message)
        return issue
      }
      throw renumbered
    }
    guard ObjectIdentifier(graph.outputType) == ObjectIdentifier(EncodedImage.self) else {
      throw PipelineError(.invalidDefinition, "\(path): a preset ends with encode (the server answers with the encoded image)")
    }
    return Preset(name: name, stages: Array(graph.stages.dropFirst()), fallbackImage: fallback)
  }

  /// A file name in the presets folder: no folders, not hidden.
  static func isFallbackName(_ name: String) -> Bool {
    !name.isEmpty && name.count <= 255 && !name.hasPrefix(".") && !name.contains("/") && !name.contains("\0")
  }

  /// `stages[N]` → `stages[N-1]` in `text` (the server's fetch was stage 0).
  static func renumbered(_ text: String) -> String {
    var result = ""
    var rest = Substring(text)
    while let range = rest.range(of: "stages[") {
      result += rest[..<range.upperBound]
      rest = rest[range.upperBound...]
      let digits = rest.prefix { $0.isASCII && $0.isNumber }
      if let number = Int(digits), number > 0, rest.dropFirst(digits.count).hasPrefix("]") {
        result += String(number - 1)
        rest = rest.dropFirst(digits.count)
      }
    }
    return result + rest
  }
}
