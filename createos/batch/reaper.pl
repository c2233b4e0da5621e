# The subreaper of one command of a batch. Alone, a command runs under the
# provider's supervisor, a child subreaper: what the command orphans (a
# double fork, setsid -f, daemon(3)) stays in its tree while it runs, and
# ends with it. The helper (node) cannot make itself one, so each command
# runs under this: it becomes a child subreaper (PR_SET_CHILD_SUBREAPER:
# kept across exec, not given to children), starts the command (its
# arguments) in a session of its own, reaps whatever comes to it, and exits
# with the command's status (128+n for signal n) as soon as the command has
# exited, leaving what it left running, as the supervisor does. Without
# arguments it only says (exit 0) whether it can be one here. Perl's core
# only, without POSIX: it starts in a few milliseconds.
use strict;
use Config;
# SYS_prctl and SYS_setsid by architecture (x32 has numbers of its own).
my %nr = ('x86_64-linux' => [157, 112], 'aarch64-linux' => [167, 157]);
my ($prctl, $setsid) = @{ $nr{ $Config{archname} =~ /^(\w+-linux)(?!-gnux32)/ ? $1 : '' } || [] };
my $subreaper = $prctl && syscall($prctl, 36, 1, 0, 0, 0) == 0; # 36: PR_SET_CHILD_SUBREAPER
exit($subreaper ? 0 : 1) unless @ARGV;
my $pid = $subreaper ? fork : undef;
if (!$pid) { # the command; without a subreaper or a fork, the command alone
	syscall($setsid) if defined $pid;
	exec { $ARGV[0] } @ARGV or print STDERR "$ARGV[0]: $!\n";
	exit 127;
}
# Its pipes are the command's alone, and strays sent to it are not its.
close STDIN;
close STDOUT;
close STDERR;
$SIG{$_} = 'IGNORE' for qw(HUP INT QUIT TERM PIPE ALRM USR1 USR2);
my $w;
do { $w = waitpid(-1, 0) } until $w == $pid || $w < 0;
exit(($? & 127) ? 128 + ($? & 127) : $? >> 8);
