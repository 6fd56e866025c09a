// indymilter – asynchronous milter library
// Copyright © 2021–2022 David Bürgin <dbuergin@gluet.ch>
//
// This program is free software: you can redistribute it and/or modify it under
// the terms of the GNU General Public License as published by the Free Software
// Foundation, either version 3 of the License, or (at your option) any later
// version.
//
// This program is distributed in the hope that it will be useful, but WITHOUT
// ANY WARRANTY; without even the implied warranty of MERCHANTABILITY or FITNESS
// FOR A PARTICULAR PURPOSE. See the GNU General Public License for more
// details.
//
// You should have received a copy of the GNU General Public License along with
// this program. If not, see <https://www.gnu.org/licenses/>.

use crate::{
    cut::{Cut, LimitPassed},
    message::{self, reply::Reply, Message},
};
use std::{io, time::Duration};
use tokio::{
    io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufStream},
    sync::{mpsc, oneshot},
    time::{self, Instant},
};
use tracing::trace;

enum Request {
    WriteMsg {
        msg: Message,
        response: oneshot::Sender<io::Result<()>>,
    },
    ReadMsg {
        response: oneshot::Sender<io::Result<Read>>,
        // mimeref-milter patch (time limits): when the open transaction's time ends.
        deadline: Option<Instant>,
        // mimeref-milter patch (body into the milter's buffer): where a body chunk
        // that fits goes, given back with the message.
        into: Option<Vec<u8>>,
    },
}

struct StreamHandler<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    stream: BufStream<S>,
    // mimeref-milter patch (time limits): `reply_timeout`; the time by which the
    // answer to the last command read must be written (set at its first packet);
    // and the limit that passed. After that the stream is in an unknown state (a
    // packet half read or half written): every further request fails at once, so
    // the session ends rather than waiting for a limit that means nothing any more.
    reply_timeout: Option<Duration>,
    reply_deadline: Option<Instant>,
    passed: Option<Cut>,
}

impl<S> StreamHandler<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    fn new(stream: S, reply_timeout: Option<Duration>) -> Self {
        Self {
            stream: BufStream::new(stream),
            reply_timeout,
            reply_deadline: None,
            passed: None,
        }
    }

    // Consumes this stream handler and handles requests for as long as requests
    // can be received on the given `Receiver`. Use with `tokio::spawn` to turn
    // this stream handler into an *actor*.
    async fn handle_requests(mut self, mut conn: mpsc::Receiver<Request>, timeout: Duration) {
        // The actor’s task is fail safe. It does not exit – and therefore does
        // not unexpectedly drop the `mpsc::Receiver` (or similarly the
        // `oneshot::Sender`) – until the `Connection` is dropped.

        while let Some(req) = conn.recv().await {
            match req {
                Request::ReadMsg {
                    response,
                    deadline,
                    mut into,
                } => {
                    // mimeref-milter patch (time limits): whichever ends first, the
                    // time for this command or the transaction's time.
                    self.reply_deadline = None;
                    let per_command = Instant::now() + timeout;
                    let (until, cut) = match deadline {
                        Some(d) if d < per_command => (d, Cut::TransactionTimeout),
                        _ => (per_command, Cut::ReadTimeout),
                    };

                    let result = match self.passed {
                        Some(passed) => Err(LimitPassed::error(passed)),
                        None => {
                            let read = message::read_into(&mut self.stream, &mut into);
                            match time::timeout_at(until, read).await {
                                Ok(r) => r,
                                Err(_) => Err(self.limit_passed(cut)),
                            }
                        }
                    };
                    let result = result.map(|(msg, appended)| Read { msg, appended, into });

                    let _ = response.send(result);
                }
                Request::WriteMsg { msg, response } => {
                    // mimeref-milter patch (time limits): the whole answer to one
                    // command within reply_timeout; without it each packet within
                    // connection_timeout, as upstream.
                    let now = Instant::now();
                    let until = match self.reply_timeout {
                        Some(t) => *self.reply_deadline.get_or_insert(now + t),
                        None => now + timeout,
                    };

                    let result = match self.passed {
                        Some(passed) => Err(LimitPassed::error(passed)),
                        None => match time::timeout_at(until, message::write(&mut self.stream, msg)).await {
                            Ok(r) => r,
                            Err(_) => Err(self.limit_passed(Cut::ReplyTimeout)),
                        },
                    };

                    let _ = response.send(result);
                }
            }
        }

        // When this actor exits it also shuts down and drops the wrapped
        // stream. An error result is no longer of interest.
        // mimeref-milter patch (time limits): not after a limit passed: shutting
        // down flushes what is buffered, and an MTA that does not read would hold
        // the stream (and the milter's connection slot) for ever. Dropped, it closes.

        if self.passed.is_none() {
            let _ = self.stream.shutdown().await;
        }
    }

    // mimeref-milter patch (time limits): the error of a limit that passed; every
    // request from now on fails with it.
    fn limit_passed(&mut self, cut: Cut) -> io::Error {
        self.passed = Some(cut);
        LimitPassed::error(cut)
    }
}

/// mimeref-milter patch (body into the milter's buffer): a message read, and the
/// buffer lent for body chunks with the number of octets appended to it (the
/// message's payload is then empty).
pub struct Read {
    pub msg: Message,
    pub appended: usize,
    pub into: Option<Vec<u8>>,
}

// A connection can be cloned. Cloned connections all carry a handle to the
// message-processing task (actor) holding the actual connection stream. Once
// the last `Connection` is dropped, so is the `mpsc::Sender` handle and the
// task then exits.
//
// Note that in a milter session, a connection is only ever read from or written
// to serially. However, during the eom stage, a clone of the connection is used
// to write replies from the eom callback.
#[derive(Clone)]
pub struct Connection {
    conn: mpsc::Sender<Request>,
}

impl Connection {
    // mimeref-milter patch (time limits): `reply_timeout`, see `Config::reply_timeout`.
    pub fn new<S>(stream: S, timeout: Duration, reply_timeout: Option<Duration>) -> Self
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let (messages_tx, messages_rx) = mpsc::channel(1);

        // Creating a `Connection` spawns a task that processes requests for as
        // long as the connection (or a clone) exists. When the last
        // `mpsc::Sender` held by a connection is dropped, the task exits.

        // The stream handler takes exclusive ownership of the stream, and is
        // handed off directly to `tokio::spawn`, becoming an *actor* solely
        // responsible for reading and writing messages to the stream.

        let handler = StreamHandler::new(stream, reply_timeout);

        tokio::spawn(handler.handle_requests(messages_rx, timeout));

        Self { conn: messages_tx }
    }

    // mimeref-milter patch (time limits): `deadline`, when the open transaction's
    // time ends (upstream: `read_message` without it).
    // The session reads with `read_message_into`; this is upstream's form, for the tests.
    #[cfg(test)]
    pub async fn read_message_until(&self, deadline: Option<Instant>) -> io::Result<Message> {
        self.read_message_into(deadline, None).await.map(|r| r.msg)
    }

    // mimeref-milter patch (body into the milter's buffer): `into`, where a body
    // chunk that fits its spare capacity is appended.
    pub async fn read_message_into(
        &self,
        deadline: Option<Instant>,
        into: Option<Vec<u8>>,
    ) -> io::Result<Read> {
        let (response_tx, response) = oneshot::channel();

        let request = Request::ReadMsg {
            response: response_tx,
            deadline,
            into,
        };

        let result = self.do_request(request, response).await;

        if let Ok(r) = &result {
            trace!(msg = ?r.msg, appended = r.appended, "message read");
        }

        result
    }

    pub async fn write_reply(&self, reply: Reply) -> io::Result<()> {
        let msg = reply.into_message();

        self.write_message(msg).await
    }

    pub async fn write_message(&self, msg: Message) -> io::Result<()> {
        let (response_tx, response) = oneshot::channel();

        trace!(?msg, "writing message");

        let request = Request::WriteMsg {
            msg,
            response: response_tx,
        };

        self.do_request(request, response).await
    }

    async fn do_request<T>(&self, request: Request, response: oneshot::Receiver<T>) -> T {
        self.conn
            .send(request)
            .await
            .unwrap_or_else(|_| panic!("connection stream closed"));

        response.await.expect("connection stream exited")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;
    use tokio::{io::AsyncReadExt, join};

    #[tokio::test]
    async fn multiple_connections() {
        let (mut client, stream) = tokio::io::duplex(100);

        let conn1 = Connection::new(stream, Duration::from_secs(30), None);
        let conn2 = conn1.clone();

        // First, read from and write to the first connection.

        client.write_all(b"\0\0\0\x03xyz").await.unwrap();

        let msg = conn1.read_message_until(None).await.unwrap();
        assert_eq!(msg, Message::new(b'x', "yz"));
        conn1.write_message(msg).await.unwrap();

        let mut buffer = vec![0; 7];
        client.read_exact(&mut buffer).await.unwrap();
        assert_eq!(buffer, b"\0\0\0\x03xyz");

        // Drop the first connection and continue using the second connection.

        drop(conn1);

        let msg = Message::new(b'x', "abc");
        conn2.write_message(msg).await.unwrap();

        let mut buffer = vec![0; 8];
        client.read_exact(&mut buffer).await.unwrap();
        assert_eq!(buffer, b"\0\0\0\x04xabc");

        // Drop the second and last remaining connection, closing the stream.

        drop(conn2);

        let e = client.read_u8().await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
    }

    #[tokio::test]
    async fn connection_timeout() {
        let timeout = Duration::from_secs(30);

        let (mut client, stream) = tokio::io::duplex(100);
        let conn = Connection::new(stream, timeout, None);

        // Both the `Connection` and the client end of the duplex stream are
        // moved into the futures. The connection is therefore dropped and
        // closes after 30 seconds. The client write then fails as it attempts
        // to write a few seconds later.

        time::pause();

        let (stream_result, client_result) = join!(
            async move { conn.read_message_until(None).await },
            async move {
                client.write_all(b"\0\0\0\x05").await.unwrap();
                time::sleep(timeout + Duration::from_secs(5)).await;
                client.write_all(b"Xyzabc").await
            },
        );

        time::resume();

        let e = stream_result.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);

        let e = client_result.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BrokenPipe);
    }

    // mimeref-milter patch (time limits)
    #[tokio::test]
    async fn transaction_deadline_ends_a_read_before_the_command_timeout() {
        time::pause();
        let (mut client, stream) = tokio::io::duplex(100);
        let conn = Connection::new(stream, Duration::from_secs(30), None);
        let t = Instant::now();
        client.write_all(b"\0\0\0\x05X").await.unwrap();
        let e = conn
            .read_message_until(Some(t + Duration::from_secs(5)))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut);
        assert_eq!(Cut::from_io(&e), Cut::TransactionTimeout);
        let at = t.elapsed();
        assert!(at >= Duration::from_secs(5) && at < Duration::from_millis(5010), "{at:?}");
        // The stream is in an unknown state: the next request fails at once.
        client.write_all(b"yzab").await.unwrap();
        let e = conn.read_message_until(None).await.unwrap_err();
        assert_eq!(Cut::from_io(&e), Cut::TransactionTimeout);
        assert_eq!(t.elapsed(), at);
    }

    // mimeref-milter patch (time limits)
    #[tokio::test]
    async fn reply_timeout_bounds_the_whole_answer_not_each_packet() {
        time::pause();
        let (mut client, stream) = tokio::io::duplex(100);
        let conn = Connection::new(stream, Duration::from_secs(30), Some(Duration::from_secs(10)));
        client.write_all(b"\0\0\0\x01E").await.unwrap();
        conn.read_message_until(None).await.unwrap();
        let t = Instant::now();
        // The first packet fits in the pipe; 8 s later the second does not and the
        // client never reads: it fails when the answer's 10 s are up, not 10 s later.
        conn.write_message(Message::new(b'h', "x")).await.unwrap();
        time::sleep(Duration::from_secs(8)).await;
        let e = conn.write_message(Message::new(b'b', vec![0; 1000])).await.unwrap_err();
        assert_eq!(Cut::from_io(&e), Cut::ReplyTimeout);
        let at = t.elapsed();
        assert!(at >= Duration::from_secs(10) && at < Duration::from_millis(10010), "{at:?}");
        // A new command starts a new answer's time; this stream has failed, though.
        let e = conn.read_message_until(None).await.unwrap_err();
        assert_eq!(Cut::from_io(&e), Cut::ReplyTimeout);
    }
}
