import Darkroom
import Foundation
import Hummingbird

// Usage: ThumbnailServer [IMAGES-FOLDER] [PORT]   (defaults: ../images, 8080)
let arguments = CommandLine.arguments
let root = URL(fileURLWithPath: arguments.count > 1 ? arguments[1] : "../images").standardizedFileURL.path
let port = arguments.count > 2 ? Int(arguments[2]) ?? 8080 : 8080

try Darkroom.bootstrap()
var configuration = ImageLoader.Configuration()
configuration.timeout = .seconds(20)
// One log line per load (finished, failed or cancelled), through swift-log.
configuration.observers = [Notifier(sinks: [LogSink()])]
let loader = ImageLoader(configuration: configuration)

let router = Router()
addThumbnailRoute(to: router, loader: loader, root: root)
let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
try await app.runService()
