import Darkroom
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// What the runner knows of each input's output files before running it, for `--dry-run` and
/// `--skip-existing`.
///
/// The rule: an output's path is the `write` or `save` stage's directory and template, filled
/// with what is known before any image is read: `{name}` (the input's name as
/// ``OutputNaming`` made it, the same in every run with the same inputs), `{variant}` and
/// `{pipeline}`; `{ext}` and `{format}` when the `encode` stage before a `write` has a fixed
/// format (`"webp"`, not `"auto"`). `{ext}` and `{format}` of an `auto` encoder, and `{ext}` of a
/// `save` stage (the extension of the format the fetched bytes are), are one of a few formats:
/// the output is found under any of them. `{width}` and `{height}` are known only once the image
/// is decoded: such an output's path cannot be known, so an input that has one is always run
/// (and `--dry-run` shows the placeholders).
struct OutputPlan: Sendable {
  /// One `write` or `save` stage of one variant.
  struct Writing: Sendable {
    var directory: String
    var template: String
    var pipeline: String
    var variant: String?
    /// The formats the output may be in: one for a fixed encoder, several otherwise.
    var formats: [ImageFormat]
    /// Whether this is a `save` stage (it fills only `{name}` and `{ext}`).
    var saves: Bool
  }

  /// One output of one input: its path with the unknown placeholders left in, and the paths it
  /// may have on disk (`nil` when it cannot be known before the image is decoded).
  struct Planned: Sendable {
    var shown: String
    var candidates: [String]?
  }

  let writings: [Writing]

  /// The `write` and `save` stages of every variant's final graph.
  init(graphs: [(graph: StageGraph, variant: String?)]) {
    var writings: [Writing] = []
    for (graph, variant) in graphs {
      var encoded: [ImageFormat] = ImageFormat.encodable
      for stage in graph.stages {
        if let encoder = stage.base as? ImageEncoder {
          encoded = encoder.format.imageFormat.map { [$0] } ?? ImageFormat.encodable
        } else if let writer = stage.base as? Writer {
          writings.append(
            Writing(
              directory: writer.directory, template: writer.template, pipeline: graph.name, variant: variant, formats: encoded,
              saves: false))
        } else if let saver = stage.base as? BytesWriter {
          writings.append(
            Writing(
              directory: saver.directory, template: saver.template, pipeline: graph.name, variant: variant,
              formats: ImageFormat.trustedDecodable, saves: true))
        }
      }
    }
    self.writings = writings
  }

  /// The outputs `source` would have.
  func outputs(of source: ImageSource) -> [Planned] {
    writings.map { writing in
      var values = ["{name}": source.name]
      if !writing.saves {
        values["{variant}"] = writing.variant ?? writing.pipeline
        values["{pipeline}"] = writing.pipeline
      }
      let shown =
        writing.formats.count == 1 ? fill(writing, values, format: writing.formats[0]) : fill(writing, values, format: nil)
      let sized = !writing.saves && (writing.template.contains("{width}") || writing.template.contains("{height}"))
      let candidates = sized ? nil : Array(Set(writing.formats.map { fill(writing, values, format: $0) })).sorted()
      return Planned(shown: shown, candidates: candidates)
    }
  }

  private func fill(_ writing: Writing, _ values: [String: String], format: ImageFormat?) -> String {
    var values = values
    if let format {
      values["{ext}"] = format.fileExtension
      if !writing.saves { values["{format}"] = format.rawValue }
    }
    return (writing.directory as NSString).appendingPathComponent(Writer.fill(writing.template, values))
  }

  /// Whether every output of `source` exists as a regular file not older than the input (blocking:
  /// `stat` calls). An input with no modification time (an `http(s)` or `data:` URL) counts as
  /// unchanged: an existing output is kept. An input that cannot be read is run (and fails as it
  /// would). A pipeline that writes no file never skips.
  func isDone(_ source: ImageSource) -> Bool {
    let planned = outputs(of: source)
    guard !planned.isEmpty else { return false }
    var inputTime: timespec?
    switch source.location {
    case .file(let path):
      guard let time = Self.modificationTime(path) else { return false }
      inputTime = time
    case .url(let url) where url.isFileURL:
      guard let time = Self.modificationTime(url.path) else { return false }
      inputTime = time
    case .url:
      inputTime = nil
    case .malformed:
      return false
    }
    return planned.allSatisfy { output in
      guard let candidates = output.candidates else { return false }
      return candidates.contains { path in
        guard let written = Self.modificationTime(path) else { return false }
        guard let inputTime else { return true }
        return (written.tv_sec, written.tv_nsec) >= (inputTime.tv_sec, inputTime.tv_nsec)
      }
    }
  }

  /// The modification time of the regular file at `path` (symlinks followed), or `nil`.
  static func modificationTime(_ path: String) -> timespec? {
    var status = stat()
    guard stat(path, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return nil }
    return status.st_mtim
  }
}
