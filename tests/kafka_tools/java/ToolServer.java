// Runs Kafka's command-line tools one after another in one JVM, so that a test run pays one JVM start per
// server instead of one per tool run (tests/kafka_tools/tools.py starts and drives it). Compiled in the test
// against the reference install's jars.
//
// Requests on stdin, one per run: a line "RUN <main class> <n>", then the n arguments one per line.
// The tool's main runs on this thread with System.out and System.err captured. Kafka's Exit.exit, which the
// tools end with, is made to throw instead of ending the JVM: its first call gives the exit code, and what
// the tool prints after it (a catch of the exception, say) is cut off, as it would never have been printed
// by a JVM that exited there. A main that returns gives 0, an exception out of it 1 with its trace on stderr,
// as in a JVM of its own. The answer on stdout:
// "DONE <exit code> <stdout bytes> <stderr bytes>" then those bytes (UTF-8), stdout first.
// A tool that calls System.exit itself (the verifiable clients) must not be run here: it would end the server.
import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.utils.internals.Exit;

public class ToolServer {
    /** Thrown by Exit.exit/halt in place of ending the JVM. */
    static final class ExitCalled extends RuntimeException {
        final int code;

        ExitCalled(int code) {
            super("Exit.exit(" + code + ")", null, false, false);
            this.code = code;
        }
    }

    // the run under way: its captured output, and once Exit.exit was called, its code and how much had been
    // printed then (-1: not called)
    private static ByteArrayOutputStream out, err;
    private static int exitCode, outAtExit, errAtExit = -1;

    private static void exitCalled(int code) {
        if (errAtExit < 0) {
            exitCode = code;
            outAtExit = out.size();
            errAtExit = err.size();
        }
        throw new ExitCalled(code);
    }

    public static void main(String[] args) throws Exception {
        PrintStream realOut = System.out, realErr = System.err;
        Exit.setExitProcedure((code, message) -> exitCalled(code));
        Exit.setHaltProcedure((code, message) -> exitCalled(code));
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.setIn(new ByteArrayInputStream(new byte[0]));
        String line;
        while ((line = in.readLine()) != null) {
            String[] head = line.split(" ");
            if (head.length != 3 || !head[0].equals("RUN")) {
                realErr.println("ToolServer: bad request line: " + line);
                System.exit(2);
            }
            String[] toolArgs = new String[Integer.parseInt(head[2])];
            for (int i = 0; i < toolArgs.length; i++) toolArgs[i] = in.readLine();
            out = new ByteArrayOutputStream();
            err = new ByteArrayOutputStream();
            errAtExit = -1;
            PrintStream toolOut = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream toolErr = new PrintStream(err, true, StandardCharsets.UTF_8);
            System.setOut(toolOut);
            System.setErr(toolErr);
            System.setIn(new ByteArrayInputStream(new byte[0]));  // a tool that asks (kafka-acls) reads the end
            int code = 0;
            try {
                Method main = Class.forName(head[1]).getMethod("main", String[].class);
                main.invoke(null, (Object) toolArgs);
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (!(cause instanceof ExitCalled)) {
                    // what the JVM's default handler does with an exception out of main: trace, exit 1
                    toolErr.print("Exception in thread \"main\" ");
                    cause.printStackTrace(toolErr);
                    code = 1;
                }
            } catch (ReflectiveOperationException e) {
                e.printStackTrace(toolErr);
                code = 1;
            } finally {
                toolOut.flush();
                toolErr.flush();
                System.setOut(realOut);
                System.setErr(realErr);
            }
            byte[] o = out.toByteArray(), r = err.toByteArray();
            if (errAtExit >= 0) {
                code = exitCode;
                o = java.util.Arrays.copyOf(o, outAtExit);
                r = java.util.Arrays.copyOf(r, errAtExit);
            }
            realOut.print("DONE " + code + " " + o.length + " " + r.length + "\n");
            realOut.write(o);
            realOut.write(r);
            realOut.flush();
        }
    }
}
