import Foundation
import PackagePlugin

/// `swift package validate-pipelines [FILE...]`: validates every Darkroom pipeline definition of
/// the package with `darkroom validate`.
///
/// Without arguments it finds pipeline files itself: every `*.json` file under the package whose
/// top-level object has a `"stages"` key (build folders and hidden folders are skipped). It fails
/// when any file is invalid and prints each problem with its JSON path.
@main
struct ValidatePipelines: CommandPlugin {
  func performCommand(context: PluginContext, arguments: [String]) async throws {
    let tool = try darkroomTool()
    let root = context.package.directoryURL
    let files = arguments.isEmpty ? findPipelineFiles(under: root) : arguments
    guard !files.isEmpty else {
      print("validate-pipelines: no pipeline files found under \(root.path)")
      return
    }
    let process = Process()
    process.executableURL = tool
    process.arguments = ["validate"] + files
    try process.run()
    process.waitUntilExit()
    if process.terminationStatus != 0 {
      Diagnostics.error("darkroom validate found invalid pipelines (exit status \(process.terminationStatus))")
      throw PipelineValidationFailed()
    }
  }

  /// Builds the `darkroom` product and returns its executable. The plugin asks the package manager
  /// for the product instead of listing the executable target as a tool dependency: the target is
  /// `DarkroomCLI` and the product `darkroom`, and SwiftPM then looks for a product named after the
  /// target ("no product named 'DarkroomCLI'", swiftlang/swift-package-manager#8831).
  private func darkroomTool() throws -> URL {
    let build = try packageManager.build(.product("darkroom"), parameters: .init(configuration: .debug))
    guard build.succeeded, let tool = build.builtArtifacts.first(where: { $0.kind == .executable }) else {
      Diagnostics.error("building the darkroom product failed:\n\(build.logText)")
      throw PipelineValidationFailed()
    }
    return tool.url
  }

  private func findPipelineFiles(under root: URL) -> [String] {
    guard let walker = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles])
    else {
      return []
    }
    var found: [String] = []
    for case let url as URL in walker {
      let name = url.lastPathComponent
      if name.hasPrefix(".build") || name == "Tests" && url.deletingLastPathComponent() == root {
        walker.skipDescendants()
        continue
      }
      guard url.pathExtension == "json", let data = try? Data(contentsOf: url), data.count < 1 << 20,
        let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], object["stages"] != nil
      else { continue }
      found.append(url.path)
    }
    return found.sorted()
  }
}

struct PipelineValidationFailed: Error, CustomStringConvertible {
  var description: String { "some pipeline files are invalid" }
}
