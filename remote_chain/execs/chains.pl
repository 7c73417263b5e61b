# chains.pl: the status exec's guard and reader of many chains where perl is there (status.bash,
# rc_read_run). It answers exactly as `find | chains.awk` does (the same lines: OK, SUSPECT,
# FALLBACK, DEFER; chains.awk's header says what each means), with the system calls the guard
# and the reader need and no more: per held chain, lstat of its folder, one listing, lstat of the
# trusted names it holds, and open/fstat/read/close of each file it reads: ~13, where find's
# fts alone made ~24 (descriptor juggling and a second stat of every folder) and awk ~5 more.
# A 1,000-chain exec's reading cost ~80 ms of login-node CPU with find and mawk, ~35 with this
# (issue 13, P7). rc_bench stays the one definition of a record: a test holds all three to it.
#   - Only the benchmarks asked are looked at (W), or, for every chain of the run (C), the
#     names bash listed: a folder with a job.sh, or one we may not read, as rc_folders keeps
#     them. What only rc_folders may judge (a symlink among the names, a folder or job.sh the
#     guard flags) sends the run there ("FALLBACK"), as chains.awk does; a file that is not a
#     folder is no chain for either and is skipped.
#   - A path the guard checks (a benchmark folder asked, a trusted name in it) that is not ours,
#     is writable by group or others, or is neither folder nor regular file is printed after
#     "SUSPECT", and nothing is read: rc_guard judges and refuses it.
#   - Readable and enterable from lstat's mode, as access(2) judges the owner (root passes);
#     a refusal the mode did not show (an ACL of a network file system) defers the chain to
#     rc_bench. A file is opened by the name lstat judged, as awk did: in a folder of ours
#     that nobody else may write, only our own processes could swap it meanwhile.
# Input on stdin, records ending in NUL: "W<TAB>bench" or "C<TAB>name" (as chains.awk), then
# "END". Environment: RC_AWK_RUN, RC_AWK_RUN_ID, RC_AWK_DIR (as chains.awk). No module is
# loaded (Fcntl alone costs 2 ms a start); no single quote (bash passes the program in one).
my ($run, $runid, $dir) = @ENV{qw(RC_AWK_RUN RC_AWK_RUN_ID RC_AWK_DIR)};
my @kinds = map { [split /=/, $_, 2] } split / /, q{__AWK_KINDS__};
my %named = map { ($_->[1] => 1) } @kinds;
$named{q{__CANCEL__}} = $named{q{__JOB__}} = 1;
my %trusted = map { ($_ => 1) } split / /, q{__TRUSTED__};
my %listed = (%named, %trusted);
my ($inline, $uid, $bad, @want, @sus, %seen) = (__INLINE__, $>, "");
my $NAME = qr/^[A-Za-z0-9._-]+\z/;

# What an lstat list says of its path, as the guard and the reader see it: "" not there, "L"
# a symlink, "S" suspect (not ours, writable by group or others, or neither folder nor regular
# file), else a plain folder we may ("D") or may not ("U") list and enter, or a plain file we
# may ("F") or may not ("R") read. 0170000: the type bits; 040000 folder, 0100000 file.
sub judge {
  return "" unless @_;
  my ($mode, $owner) = @_[2, 4];
  my $type = $mode & 0170000;
  return "L" if $type == 0120000;
  return "S" if $owner != $uid || $mode & 022 || ($type != 040000 && $type != 0100000);
  return $uid == 0 || ($mode & 0500) == 0500 ? "D" : "U" if $type == 040000;
  return $uid == 0 || $mode & 0400 ? "F" : "R";
}

# judge of a path, by its mode and owner: the same few pairs (0600 and 0700 files, 0700
# folders, ours) recur across 1,000 chains, and a call with lstat's list costs more than
# the lookup (~3 ms of a 1,000-chain exec). "" when lstat found nothing.
my %class_of;
sub class_of {
  my ($mode, $owner) = @_;
  return "" unless defined $mode;
  my $k = "$mode $owner";
  return exists $class_of{$k} ? $class_of{$k} : ($class_of{$k} = judge(0, 0, $mode, 0, $owner));
}

# One chain folder, looked at once: [its class, the listed names in it in the listing order,
# name -> [class, size]]; only a plain folder we may enter is listed.
sub scan {
  my ($b) = @_;
  return $seen{$b} if exists $seen{$b};
  my $class = class_of((lstat $b)[2, 4]);
  my (@names, %in);
  if ($class eq "D") {
    if (opendir(my $dh, $b)) {
      @names = grep { $listed{$_} } readdir $dh;
      closedir $dh;
    } else { $bad = "a folder to list" }
    for my $f (@names) {
      my ($mode, $owner, $size) = (lstat "$b/$f")[2, 4, 7];
      $in{$f} = [class_of($mode, $owner), $size] if defined $mode;
    }
  }
  return $seen{$b} = [$class, [grep { $in{$_} } @names], \%in];
}

# C: whether a name of the run folder is a chain, as rc_folders would keep it (a folder with
# a job.sh, or one we may not read); what only it may judge sends the run there.
sub candidate {
  my ($b) = @_;
  my ($class, undef, $in) = @{scan($b)};
  if ($class eq "L") { $bad = "a symlink among the names"; return 0 }
  return 0 if $class eq "" || $class eq "F" || $class eq "R";
  my $job = $in->{q{__JOB__}};
  if ($class eq "S" || ($job && $job->[0] ne "F" && $job->[0] ne "R")) {
    $bad = "a folder to stat";  # or a file: only a stat tells which; rc_folders does
    return 0;
  }
  return 0 unless $job || $class eq "U";
  if ($b !~ $NAME) { $bad = "a name"; return 0 }
  return 1;
}

if (!chdir $dir) { $bad = "the run folder" }
{
  local $/ = "\0";
  my $ended = 0;
  while ($bad eq "" && defined(my $line = <STDIN>)) {
    chomp $line;
    if ($line eq "END") { $ended = 1; last }
    my ($tag, $name, @rest) = split /\t/, $line, -1;
    if (@rest || !defined $name || ($tag ne "W" && $tag ne "C")) { $bad = "a name"; last }
    if ($tag eq "W") { push @want, $name }
    elsif ($name ne q{__UPLOADS__} && candidate($name)) { push @want, $name }
  }
  $bad = "no end of the list" if !$ended && $bad eq "";
}

# A file of SIZE bytes (lstat), whole: undef when rc_bench must read it (bigger than the inline
# limit, not readable after all, changed since lstat, a byte rc_emit escapes or base64 sends:
# one outside printable ASCII and the newline, a tab, a backslash). ":unix" reads with no
# buffer of its own, and no isatty or lseek per file.
sub slurp {
  my ($path, $size) = @_;
  return undef if $size > $inline;
  open(my $fh, "<:unix", $path) or return undef;
  my $t = "";
  my $n = sysread($fh, $t, $inline + 1);  # one read when the file is as long as lstat said
  $n = sysread($fh, $t, $inline + 1 - length $t, length $t) while $n && length $t < $size;
  close $fh;
  return undef if !defined $n || length $t != $size || $t =~ /[^\n -~]/ || index($t, "\\") >= 0;
  return $t;
}

# The guard first, over every chain asked: no file of the run is read before each path it
# checks has passed (as with find and awk). A chain that is not a plain folder we may enter
# has its record already; the others their readable files' sizes.
my @plan;
for my $b (@want) {
  last if $bad ne "";
  if ($b !~ $NAME || $b eq "." || $b eq "..") { $bad = "a name"; last }
  my ($class, $order, $in) = @{scan($b)};
  if ($class eq "L" || $class eq "S") { push @sus, "$dir/$b"; next }
  if ($class ne "D") {
    push @plan, [$b, ($class eq "U" ? "UNREADABLE" : "NOBENCH") . "\t$run\t$b"];
    next;
  }
  my (%size, %unread);
  for my $f (@$order) {
    my ($c, $size) = @{$in->{$f}};
    if ($c eq "L" || $c eq "S") {  # the guard judges what it checks; any other file: rc_bench
      if ($trusted{$f}) { push @sus, "$dir/$b/$f" } elsif ($named{$f}) { $bad = "$b/$f" }
    } elsif ($c eq "D" || $c eq "U") {
      $bad = "$b/$f" if $named{$f};  # a folder named as a file of the chain
    } elsif ($named{$f}) {
      if ($c eq "F") { $size{$f} = $size } else { $unread{$f} = 1 }
    }
  }
  push @plan, [$b, "", \%size, \%unread];
}
@plan = () if @sus || $bad ne "";

my (@out, @names, @ids);
for my $p (@plan) {
  my ($b, $done, $size, $unread) = @$p;
  if ($done) { push @out, $done; next }
  my $rec = "BENCH\t$run\t$b\t" . (exists $size->{q{__CANCEL__}} || $unread->{q{__CANCEL__}} ? 1 : 0);
  my (%text, $defer);
  for my $k (@kinds) {
    my ($kind, $f) = @$k;
    if ($unread->{$f}) { $rec .= "\t$kind\tunreadable\t"; next }
    next unless exists $size->{$f};
    my $t = slurp("$b/$f", $size->{$f});
    if (!defined $t) { $defer = 1; last }
    $text{$kind} = $t;
    (my $escaped = $t) =~ s/\n/\\n/g;
    $rec .= "\t$kind\tok\t$escaped";
  }
  if ($defer) { push @out, "DEFER\t$b"; next }
  push @out, $rec;
  push @names, "$runid:$b";
  # The job ids of complete lines (what follows the last newline is still being written): the
  # chain and first job files, and each successor event.
  for my $kind (qw(chain first events)) {
    next unless defined $text{$kind};
    my @lines = split /\n/, $text{$kind}, -1;
    pop @lines;
    for my $l (@lines) {
      if ($kind ne "events") { push @ids, $l if $l =~ /^[0-9_+]+\z/; next }
      next if index($l, "successor") < 0;
      my @w = split " ", $l;
      push @ids, $w[3] if @w >= 4 && $w[2] eq "successor" && $w[3] =~ /^[0-9_+]+\z/;
    }
  }
}

if ($bad ne "") { print "FALLBACK\t$bad\n"; exit 0 }
if (@sus) { print join("\n", "SUSPECT", @sus), "\n"; exit 0 }
# With no chain deferred, the records go straight to the exec's answer (descriptor 3, which
# status.bash opens on it), and bash takes only the job names and ids: bash split and wrote
# 1,000 chains' records again, ~8 ms of a 1,000-chain exec. They come as the lines the squeue
# awk of status.bash reads ("N name", "I id"), which bash keeps as one text and does not
# split unless it must (~6 ms more), after a first line "FEED", the counts, the bytes that
# follow it (bash takes nothing as sent unless all of it came) and whether every name is one
# awk may compare as it is: each chain is NAME, so each name is when the run id is too.
# (First, not last: bash finds a first line in a long text at once, a last one in ~2 ms.)
if (@out && !grep({ index($_, "DEFER\t") == 0 } @out) && open(my $answer, ">&=", 3)) {
  if ((print $answer join("\n", @out), "\n") && close $answer) {
    my $feed = join("\n", map({ "N $_" } @names), map({ "I $_" } @ids));
    my $plain = $runid =~ /^[A-Za-z0-9._-]+\z/ ? 1 : 0;
    print join(" ", "FEED", scalar @out, scalar @names, scalar @ids, length $feed, $plain), "\n", $feed;
    exit 0;
  }
}
print join("\n", "OK " . @out . " " . @names . " " . @ids, @out, @names, @ids), "\n";
