// The demo has its code only with the package trait `Examples` (its loopback HTTP server and
// command-line parsing): without it, every other source file is compiled out (each is wrapped in
// `#if Examples`, as a new one must be) and the program says how to run it.
#if !Examples
import Foundation

@main
enum TaskKitDemoNeedsExamplesTrait {
    static func main() {
        FileHandle.standardError.write(Data("taskkit-demo needs the package trait Examples: swift run --enable-all-traits taskkit-demo\n".utf8))
        exit(1)
    }
}
#endif
