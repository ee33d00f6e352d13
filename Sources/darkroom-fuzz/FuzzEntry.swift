import Foundation

// Built with `make fuzz` (`--sanitize=fuzzer --sanitize=address -DFUZZING`), libFuzzer provides
// `main` and calls `LLVMFuzzerTestOneInput` with each input; DARKROOM_FUZZ_TARGET picks the
// harness. Built normally, `darkroom-fuzz HARNESS FILE...` replays inputs (crash reproducers,
// seed corpora) through a harness.

/// The harness named by DARKROOM_FUZZ_TARGET (json, decode, http, cache, imagetable, disk).
let selectedHarness: Harness = {
  let name = ProcessInfo.processInfo.environment["DARKROOM_FUZZ_TARGET"] ?? "json"
  guard let harness = Harness(rawValue: name) else {
    FileHandle.standardError.write(Data("DARKROOM_FUZZ_TARGET must be one of json, decode, http, cache, imagetable, disk\n".utf8))
    exit(64)
  }
  return harness
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
  let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? []
  selectedHarness.run(bytes)
  return 0
}

#if !FUZZING
  @main
  struct Replay {
    static func main() {
      let arguments = CommandLine.arguments.dropFirst()
      guard let name = arguments.first, let harness = Harness(rawValue: name) else {
        FileHandle.standardError.write(
          Data(
            "usage: darkroom-fuzz json|decode|http|cache|imagetable|disk FILE|DIR...  (replays inputs through a harness)\n".utf8))
        exit(64)
      }
      var count = 0
      for path in arguments.dropFirst() {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
        let files =
          isDirectory.boolValue
          ? ((try? FileManager.default.subpathsOfDirectory(atPath: path)) ?? []).sorted().map { path + "/" + $0 } : [path]
        for file in files {
          var isFolder: ObjCBool = false
          guard FileManager.default.fileExists(atPath: file, isDirectory: &isFolder), !isFolder.boolValue,
            let data = FileManager.default.contents(atPath: file)
          else { continue }
          harness.run(Array(data))
          count += 1
        }
      }
      print("\(harness.rawValue): \(count) inputs replayed, no crash")
    }
  }
#endif
